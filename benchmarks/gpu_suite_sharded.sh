#!/usr/bin/env bash
# The GPU tests in two stages that together are exactly `-m "gpu or multigpu"`, for a device
# call on a machine of several GPUs:
#
#   bash benchmarks/gpu_suite_sharded.sh single     # `gpu and not multigpu`: one pytest per GPU
#   bash benchmarks/gpu_suite_sharded.sh multi P N  # `multigpu`: slice P of N of the test files,
#                                                   # every GPU visible, one test at a time
#
# `single` runs the one-GPU tests sharded by file over the GPUs (shard i sees only GPU i, so
# the shards never share a GPU); `multi` runs the tests that need several GPUs as gpu_suite.sh
# does. Logs go to $OUT (or out/) as suite-single-<i>.log / suite-multi-<P>.log; the exit
# status is non-zero when any shard failed. LIMIT (seconds, default 560) bounds a stage,
# TEST_TIMEOUT (default 200) each test.
set -uo pipefail
stage=${1:?usage: gpu_suite_sharded.sh single | multi PART PARTS}
cd "$(dirname "$0")/.."
logs=${OUT:-out}
mkdir -p "$logs"
files() { LC_ALL=C ls tests/test_*.py tests/graph/test_*.py | LC_ALL=C sort; }
run() { timeout "${LIMIT:-560}" python3 -m pytest -q -rfs -p no:cacheprovider \
            --timeout "${TEST_TIMEOUT:-200}" "$@"; }
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
    done
    exit $status ;;
multi)
    part=${2:?usage: gpu_suite_sharded.sh multi PART PARTS}
    parts=${3:?usage: gpu_suite_sharded.sh multi PART PARTS}
    slice=$(files | awk -v p="$part" -v n="$parts" '(NR - 1) % n == p - 1')
    run -m multigpu $slice > "$logs/suite-multi-$part.log" 2>&1
    rc=$?
    echo "multi $part of $parts: exit $rc; $(tail -1 "$logs/suite-multi-$part.log")"
    grep -E "^(FAILED|ERROR)" "$logs/suite-multi-$part.log" | head -40
    [[ $rc -eq 0 || $rc -eq 5 ]] ;;
*)
    echo "usage: gpu_suite_sharded.sh single | multi PART PARTS" >&2; exit 2 ;;
esac
