#!/usr/bin/env bash
# One device call that times an earlier tree and this one with the same `groute bench` command,
# back to back on the same GPU, so a change is judged against a baseline measured beside it.
#   BEFORE=.before bash benchmarks/gpu_before_after.sh [extra groute bench options]
# BEFORE: a source tree of the earlier commit (e.g. `git archive <commit> | tar -x -C .before`,
# carried to the device machine as an ignored path). APPS, GRAPHS, REPEAT, LIMIT, REFERENCE set
# the runs; TAG prefixes the output files.
# Writes $OUT/<TAG>before.{json,md}, $OUT/<TAG>after.{json,md} and prints the medians side by side.
set -u
OUT=${OUT:-/tmp/groute-out}; mkdir -p "$OUT"
BEFORE=${BEFORE:-.before}
APPS=${APPS:-bfs,sssp,pr,cc}
GRAPHS=${GRAPHS:-kron:21,grid:4900}
REPEAT=${REPEAT:-7}
LIMIT=${LIMIT:-280}
REFERENCE=${REFERENCE:-gpu}
TAG=${TAG:-}
SITE=${SITE:-/tmp/site}
export PYTHONUNBUFFERED=1 GROUTE_CACHE_DIR=${GROUTE_CACHE_DIR:-/tmp/groute-cache}
bench() {  # label tree
  local label=$1 tree=$2
  (cd "$tree" && PYTHONPATH="$PWD:$SITE" GROUTE_COMMIT="${3:-}" timeout "$LIMIT" \
     python3 -m groute bench --apps "$APPS" --graphs "$GRAPHS" --devices 1 --peers none \
     --reference "$REFERENCE" --repeat "$REPEAT" --max-case-seconds 3 --quiet "${@:4}" \
     --json "$OUT/$label.json" --markdown "$OUT/$label.md") > "$OUT/$label.log" 2>&1
  echo "$label rc=$?"
}
here=$PWD
case "$GRAPHS" in *.graphs/*) [ -d "$BEFORE/.graphs" ] || cp -r .graphs "$BEFORE/.graphs" ;; esac
bench "${TAG}before" "$BEFORE" "${BEFORE_COMMIT:-before}" "$@"
bench "${TAG}after" "$here" "${GROUTE_COMMIT:-}" "$@"
python3 - "$OUT/${TAG}before.json" "$OUT/${TAG}after.json" <<'PY'
import json, sys
def cases(path):
    try:
        data = json.load(open(path))
    except Exception as exc:  # a run that failed to write its JSON
        print(f"{path}: {exc}"); return {}
    out = {}
    for c in data.get("cases", []):
        key = (c.get("app"), c.get("graph"), c.get("devices"), c.get("mode"))
        out[key] = (c.get("time_s"), c.get("status"))
    return out
b, a = cases(sys.argv[1]), cases(sys.argv[2])
print(f"{'app':6} {'graph':32} {'dev':>3} {'mode':6} {'before':>10} {'after':>10} {'after/before':>12}")
for key in sorted(set(b) | set(a), key=str):
    tb, ta = b.get(key, (None,))[0], a.get(key, (None,))[0]
    ratio = f"{ta / tb:.3f}" if tb and ta else "-"
    fmt = lambda t: f"{t * 1e3:.3f}ms" if t else "-"
    print(f"{key[0]!s:6} {key[1]!s:32} {key[2]!s:>3} {key[3]!s:6} {fmt(tb):>10} {fmt(ta):>10} {ratio:>12}"
          f"  {b.get(key, (0, '-'))[1]}/{a.get(key, (0, '-'))[1]}")
PY
