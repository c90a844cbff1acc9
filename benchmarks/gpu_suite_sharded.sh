#!/usr/bin/env bash
# The GPU tests in stages, for a device call on a machine of one or several GPUs. `single` and
# `multi` together are exactly `-m "gpu or multigpu"`; `contended` runs the one-GPU tests again
# as a busy, shared GPU runs them:
#
#   bash benchmarks/gpu_suite_sharded.sh single     # `gpu and not multigpu`: one pytest per GPU
#   bash benchmarks/gpu_suite_sharded.sh multi P N  # `multigpu`: slice P of N of the tests,
#                                                   # every GPU visible, one test at a time
#                                                   # (WORKERS=k: k pytest workers at once)
#   bash benchmarks/gpu_suite_sharded.sh contended  # `gpu and not multigpu`: 4 pytest workers
#                                                   # (pytest-xdist -n 4) sharing GPU 0
#
# `single` runs the one-GPU tests sharded by file over the GPUs (shard i sees only GPU i, so
# the shards never share a GPU); `multi` runs the tests that need several GPUs, dealt to the
# slices one test at a time in collection order (a test's 2-, 3- and 4-device cases land in
# different slices, so the slices take about equal time). `contended` puts four test processes on GPU 0 at once: each one's kernels wait behind
# the others', so CuPy work left on CuPy's default stream instead of a device's compute stream
# (which does not wait for it) reads or writes an array at the wrong time: the race class that
# only this stage shows (tests/test_streams.py provokes it on purpose, the rest by chance).
#
# Every stage prints its 25 slowest tests (pytest --durations=25: the tests to shorten when a
# stage runs past LIMIT). Logs go to $OUT (or out/) as suite-single-<i>.log,
# suite-multi-<P>.log, suite-contended.log; the exit status is non-zero when any shard failed.
# LIMIT (seconds, default 560) bounds a stage, TEST_TIMEOUT (default 200) each test. A stage
# that reaches LIMIT is interrupted (SIGINT, then killed 20 s later), so pytest still prints
# what ran, its failures and durations.
set -uo pipefail
usage="usage: gpu_suite_sharded.sh single | multi PART PARTS | contended"
stage=${1:?$usage}
cd "$(dirname "$0")/.."
logs=${OUT:-out}
mkdir -p "$logs"
files() { LC_ALL=C ls tests/test_*.py tests/graph/test_*.py | LC_ALL=C sort; }
run() { timeout -s INT -k 20 "${LIMIT:-560}" python3 -m pytest -q -rfs -p no:cacheprovider --durations=25 \
            --timeout "${TEST_TIMEOUT:-200}" "$@"; }
# the durations block of a log (header and its 25 lines), then its failures
report() {
    grep -A 25 -E "slowest [0-9]+ durations" "$1"
    grep -E "^(FAILED|ERROR)" "$1" | head -40
}
case "$stage" in
single)
    gpus=$(nvidia-smi -L | wc -l)
    pids=()
    for ((i = 0; i < gpus; i++)); do
        shard=$(files | awk -v p="$i" -v n="$gpus" '(NR - 1) % n == p')
        CUDA_VISIBLE_DEVICES=$i run -m "gpu and not multigpu" $shard \
            > "$logs/suite-single-$i.log" 2>&1 &
        pids+=($!)
    done
    status=0
    for ((i = 0; i < gpus; i++)); do
        wait "${pids[$i]}"; rc=$?
        # 5: no test collected in this shard
        if [[ $rc -ne 0 && $rc -ne 5 ]]; then status=1; fi
        echo "shard $i (GPU $i): exit $rc; $(tail -1 "$logs/suite-single-$i.log")"
        report "$logs/suite-single-$i.log"
    done
    exit $status ;;
multi)
    part=${2:?$usage}
    parts=${3:?$usage}
    # test ids hold spaces and quotes (parameters): one array element per line; a collection
    # error (a file that does not import) stops the stage instead of leaving its tests out
    if ! python3 -m pytest --collect-only -q -p no:cacheprovider -m multigpu $(files) \
            > "$logs/collect-multi.log" 2>&1; then
        echo "collecting the multigpu tests failed:"; tail -30 "$logs/collect-multi.log"; exit 1
    fi
    mapfile -t slice < <(grep -E '^tests/[^[:space:]]*::' "$logs/collect-multi.log" |
                         awk -v p="$part" -v n="$parts" '(NR - 1) % n == p - 1')
    if [[ ${#slice[@]} -eq 0 ]]; then
        echo "multi $part of $parts: no test in this slice"; exit 0
    fi
    workers=()
    if [[ ${WORKERS:-1} -gt 1 ]]; then workers=(-n "$WORKERS"); fi
    run "${workers[@]}" -m multigpu "${slice[@]}" > "$logs/suite-multi-$part.log" 2>&1
    rc=$?
    echo "multi $part of $parts: exit $rc; $(tail -1 "$logs/suite-multi-$part.log")"
    report "$logs/suite-multi-$part.log"
    [[ $rc -eq 0 || $rc -eq 5 ]] ;;
contended)
    CUDA_VISIBLE_DEVICES=0 run -n 4 -m "gpu and not multigpu" $(files) \
        > "$logs/suite-contended.log" 2>&1
    rc=$?
    echo "contended (4 workers on GPU 0): exit $rc; $(tail -1 "$logs/suite-contended.log")"
    report "$logs/suite-contended.log"
    [[ $rc -eq 0 || $rc -eq 5 ]] ;;
*)
    echo "$usage" >&2; exit 2 ;;
esac
