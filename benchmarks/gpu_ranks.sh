#!/usr/bin/env bash
# One process per GPU (groute.distributed on CUDA) on a GPU machine: its tests, and 4 ranks
# timed against 4 threads of one process. Logs under $OUT, packed into $OUT/results.tgz.
#   bash benchmarks/gpu_ranks.sh STAGES     STAGES: comma list of
#     cpu     the multi-process tests of the CPU backend and the transport's unit tests
#     one     the `gpu` tests of tests/test_distributed_gpu.py: 2 ranks sharing GPU 0 over the
#             MPI transport (nvidia-h200)
#     multi   its `multigpu` tests: 2 and 4 ranks, one per GPU, over NCCL (nvidia-h200-x4)
#     time    for each of APPS on each of GRAPHS: `groute launch -n $RANKS -- APP --graph G
#             --backend cuda --repeat 5 --json` as `auto` runs it (BFS, SSSP: the peer kernel
#             across the ranks through CUDA IPC, PageRank its persistent kernel, CC rank 0's
#             reads of every rank's changes and rows in place: -ipc.json;
#             PageRank again with the threads' kernel, `--bsp-kernel bins`: -ipc-bins.json),
#             then on the host exchange (`--exchange host`, `--persistent off`) over NCCL and
#             over MPI, and
#             `groute APP --graph G --backend cuda --devices $RANKS --repeat 5 --json`
#             (threads; PageRank also with the ranks' sweep, `--partition contiguous
#             --bsp-kernel csc`: -threads-csc.json), one JSON line each in
#             $OUT/time/APP-G-{nccl,mpi,ipc,ipc-bins,threads,threads-csc}.json
#             (nvidia-h200-x4)
# Defaults: APPS="bfs sssp pr cc", GRAPHS="kron:21", RANKS=4, RUN_LIMIT=240 (seconds per run).
# Where the machine lacks mpi4py and an MPI, stage the mpi4py and mpich wheels for its Python
# into .whl/ beside the others (benchmarks/README.md): they are installed under a prefix of
# their own (the mpich wheel's libmpi and mpiexec are data files, which pip's --target drops),
# and mpi4py is pointed at that libmpi (MPI4PY_LIBMPI).
set -u
OUT=${OUT:-/tmp/groute-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export PYTHONPATH=$PWD
pip_offline() { python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade "$@"; }
others=$(ls .whl/*.whl 2>/dev/null | grep -v -e '/mpich-' -e '/mpi4py-' || true)
if [ -n "$others" ]; then
  pip_offline --target /tmp/site $others && export PYTHONPATH=$PYTHONPATH:/tmp/site
fi
mpi=$(ls .whl/mpich-*.whl .whl/mpi4py-*.whl 2>/dev/null || true)
if [ -n "$mpi" ]; then
  pip_offline --prefix /tmp/mpi $mpi
  export PATH=/tmp/mpi/bin:$PATH MPI4PY_LIBMPI=/tmp/mpi/lib
  export PYTHONPATH=$PYTHONPATH:$(ls -d /tmp/mpi/lib/python3*/site-packages | head -1)
fi
python3 -c "import mpi4py" 2>/dev/null || echo "no mpi4py here: the multi-process tests skip and 'time' fails (stage the wheels, above)"
stages=${1:-one}
STAGE_TAIL=25
source "$(dirname "$0")/stages.sh"
timings() {
  mkdir -p "$OUT/time"
  local app graph rc
  for graph in ${GRAPHS:-kron:21}; do
    for app in ${APPS:-bfs sssp pr cc}; do
      local base="$OUT/time/$app-${graph//:/_}"
      # auto: the persistent kernels across the ranks (CUDA IPC) where the app has them
      host=""; case $app in bfs|sssp|cc) host="--exchange host";; pr) host="--persistent off";; esac
      if [ -n "$host" ]; then
        timeout "${RUN_LIMIT:-240}" python3 -m groute launch -n "${RANKS:-4}" -- "$app" \
          --graph "$graph" --backend cuda --repeat 5 --json \
          > "$base-ipc.json" 2> "$base-ipc.err"
        rc=$?; echo "$app $graph ranks/ipc rc=$rc"
      fi
      if [ "$app" = pr ]; then      # the threads' kernel across the ranks (auto keeps csc there)
        timeout "${RUN_LIMIT:-240}" python3 -m groute launch -n "${RANKS:-4}" -- pr \
          --graph "$graph" --backend cuda --bsp-kernel bins --repeat 5 --json \
          > "$base-ipc-bins.json" 2> "$base-ipc-bins.err"
        rc=$?; echo "$app $graph ranks/ipc bins rc=$rc"
      fi
      for transport in nccl mpi; do
        GROUTE_RANK_TRANSPORT=$transport timeout "${RUN_LIMIT:-240}" python3 -m groute launch \
          -n "${RANKS:-4}" -- "$app" --graph "$graph" --backend cuda $host --repeat 5 --json \
          > "$base-$transport.json" 2> "$base-$transport.err"
        rc=$?; echo "$app $graph ranks/$transport rc=$rc"
      done
      timeout "${RUN_LIMIT:-240}" python3 -m groute "$app" --graph "$graph" --backend cuda \
        --devices "${RANKS:-4}" --repeat 5 --json > "$base-threads.json" 2> "$base-threads.err"
      rc=$?; echo "$app $graph threads rc=$rc"
      if [ "$app" = pr ]; then      # the ranks' sweep (csc over contiguous ranges) on threads
        timeout "${RUN_LIMIT:-240}" python3 -m groute pr --graph "$graph" --backend cuda \
          --devices "${RANKS:-4}" --partition contiguous --bsp-kernel csc --repeat 5 --json \
          > "$base-threads-csc.json" 2> "$base-threads-csc.err"
        rc=$?; echo "$app $graph threads csc rc=$rc"
      fi
    done
  done
  python3 - "$OUT/time" <<'EOF'
import json, pathlib, sys
rows = []
for path in sorted(pathlib.Path(sys.argv[1]).glob("*.json")):
    try:
        run = json.loads(path.read_text().strip().splitlines()[-1])
    except (ValueError, IndexError):
        rows.append(f"{path.stem:32s} no result (see {path.with_suffix('.err').name})")
        continue
    rows.append(f"{path.stem:32s} median {run['time_s']:.4f} s (load {run['load_s']:.2f} s, "
                f"set-up {run['setup_s']:.2f} s) on {run['devices']} {run['backend']} devices")
print("\n".join(rows))
EOF
}
stage cpu 560 python3 -m pytest -q -p no:cacheprovider --timeout 240 -m "not gpu and not multigpu" \
  tests/test_rank_transport.py tests/test_distributed_runtime.py tests/test_distributed_apps.py
stage one 560 python3 -m pytest -q -rfs -p no:cacheprovider --timeout 450 -m "gpu and not multigpu" \
  tests/test_distributed_gpu.py
stage multi 560 python3 -m pytest -q -rfs -p no:cacheprovider --timeout 450 -m multigpu \
  tests/test_distributed_gpu.py
stage time 580 timings
stage_summary
# the device tool returns a few files: pack everything into one archive
pack_results
