# Source at the start of a device call, from the repository root (bash):
#   source benchmarks/device_env.sh          # ... the call's work ...
#   bash benchmarks/device_env.sh save       # at its end: CuPy's kernel cache into $OUT
# Names the commit sent ($GROUTE_COMMIT from .commit). Installs the staged wheels of .whl/
# (pymetis; not mpich and mpi4py, which gpu_ranks.sh installs under a prefix of its own) into
# /tmp/site behind this checkout on PYTHONPATH (the checkout is what runs: an installed groute
# would be another commit's), keeps NCCL off NVLink multicast, and points CuPy's kernel cache at
# /tmp/kcache, unpacked from .kcache/kcache.tgz where a previous call saved it (carry .kcache): a
# fresh machine would otherwise compile every kernel again, minutes of a call.
if [ "${1:-}" = save ]; then
  tar czf "${OUT:?}/kcache.tgz" -C "${CUPY_CACHE_DIR:-/tmp/kcache}" . && ls -la "$OUT/kcache.tgz"
  echo "copy it into .kcache/ for the next call"
  exit 0
fi
wheels=$(ls .whl/*.whl 2>/dev/null | grep -v -e /mpich- -e /mpi4py- -e /groute-)
[ -n "$wheels" ] && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
  --upgrade --target /tmp/site $wheels
export PYTHONPATH=$PWD:/tmp/site NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 CUPY_CACHE_DIR=/tmp/kcache
# The copy of the tree on the device machine may carry a stale .git: the commit sent is named in
# .commit (git rev-parse --short HEAD > .commit before the call, carried), and reports use it.
[ -f .commit ] && export GROUTE_COMMIT=$(cat .commit)
mkdir -p "$CUPY_CACHE_DIR"
if [ -f .kcache/kcache.tgz ]; then
  tar xzf .kcache/kcache.tgz -C "$CUPY_CACHE_DIR" && echo "kernel cache: $(ls "$CUPY_CACHE_DIR" | wc -l) entries"
fi
