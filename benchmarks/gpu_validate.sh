#!/usr/bin/env bash
# One device-tool call that validates the whole project on a GPU machine and leaves logs in $OUT.
#   bash benchmarks/gpu_validate.sh STAGES     STAGES: comma list of
#     info,tests,demo,topo,prcc,bench,newapps,bc,nx,big
# (newapps: k-core and SCC in groute bench; bc: betweenness in groute bench, verified, and timed
# alone from 64 sources on kron:21; nx: every function of the NetworkX backend against NetworkX,
# on the GPU (10^4..10^6 edges) and the CPU backend (10^5), benchmarks/nx_backend.py;
# big: BFS, SSSP, PageRank and CC on one GPU on ${BIG_GRAPH:-kron:26:32}, past 2^31 arcs, checked;
# run it alone: it needs most of the 10 minutes a command may take)
# Each stage runs under its own time limit, logs to $OUT/<stage>.log, and is summarised at the end,
# so one failing stage does not hide the others. Needs pymetis as a wheel in .whl/
# (benchmarks/README.md).
set -u
OUT=${OUT:-/tmp/groute-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=$PWD:/tmp/site
else
  export PYTHONPATH=$PWD
fi
export GROUTE_COMMIT=${GROUTE_COMMIT:-}   # empty: groute.machine asks git
stages=${1:-info,tests,demo,topo}
source "$(dirname "$0")/stages.sh"
stage info 60 python3 -m groute info
stage tests ${TESTS_LIMIT:-420} python3 -m pytest -m "${TEST_MARKS:-gpu or multigpu}" -q -p no:cacheprovider --timeout 240 tests
stage demo ${DEMO_LIMIT:-120} python3 -m groute demo
stage topo ${TOPO_LIMIT:-240} python3 -m groute topo all --json "$OUT/topo.json" --plot "$OUT/plots" --markdown "$OUT/topo.md"
stage prcc ${PRCC_LIMIT:-400} env OUT="$OUT" python3 benchmarks/probes/gpu_check_pr_cc.py --budget ${PRCC_BUDGET:-240}
stage bench ${BENCH_LIMIT:-560} python3 -m groute bench ${BENCH_ARGS:---preset quick} --json "$OUT/bench.json" --markdown "$OUT/bench.md" --plot "$OUT/bench_plots"
stage newapps ${NEWAPPS_LIMIT:-200} python3 -m groute bench --apps kcore,scc --graphs ${NEWAPPS_GRAPHS:-kron:21,grid:4900} --devices 1 --peers scipy,igraph,networkx --repeat 3 --warmup 1 --peer-repeat 1 --max-case-seconds 22 --reference auto --json "$OUT/newapps.json" --markdown "$OUT/newapps.md"
stage bc ${BC_LIMIT:-60} sh -c "python3 -m groute bench --apps betweenness --graphs ${BC_GRAPHS:-kron:16} --devices 1 --peers igraph --repeat 3 --max-case-seconds 3 --json '$OUT/bc.json' --markdown '$OUT/bc.md' && python3 -m groute betweenness --graph kron:21 --k 64 --repeat 3"
stage nx ${NX_LIMIT:-360} sh -c "python3 benchmarks/nx_backend.py --backends cuda --edges ${NX_EDGES:-1e4,1e5,1e6} --nx-budget ${NX_BUDGET:-10} --json '$OUT/nx_cuda.json' --markdown '$OUT/nx_cuda.md'; cuda=\$?; python3 benchmarks/nx_backend.py --backends cpu --edges ${NX_CPU_EDGES:-1e5} --nx-budget ${NX_BUDGET:-10} --repeat 2 --json '$OUT/nx_cpu.json' --markdown '$OUT/nx_cpu.md' && exit \$cuda"
stage big ${BIG_LIMIT:-540} python3 benchmarks/probes/gpu_big_graph.py --graph "${BIG_GRAPH:-kron:26:32}" --json "$OUT/big.json"
stage_summary
pack_results
