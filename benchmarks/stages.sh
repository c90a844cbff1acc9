# Sourced by the device scripts (gpu_validate.sh, gpu_ranks.sh): their stages, one way.
#   stage NAME LIMIT_S COMMAND...   runs COMMAND (a program or a shell function) when NAME is in
#                                   the comma list $stages, its output in $OUT/NAME.log, for at
#                                   most LIMIT_S seconds; prints
#                                   the log's last $TAIL lines (default STAGE_TAIL) and adds a
#                                   line to `summary`
#   stage_summary                   prints the summary lines, also into $OUT/summary.txt
#   pack_results                    packs $OUT into $OUT/results.tgz
summary=()
stage() {
  local name=$1 limit=$2; shift 2
  case ",$stages," in *",$name,"*) ;; *) return;; esac
  local t0=$SECONDS
  if declare -F "$1" > /dev/null; then     # a shell function: timeout runs programs only
    OUT="$OUT" timeout "$limit" bash -c "$(declare -f "$1"); \"\$@\"" _ "$@" \
      > "$OUT/$name.log" 2>&1
  else
    timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  fi
  local rc=$?
  summary+=("$(printf '%-6s rc=%-3s %4ss' "$name" "$rc" $((SECONDS - t0)))")
  echo "=== $name (rc=$rc) ==="; tail -n "${TAIL:-${STAGE_TAIL:-15}}" "$OUT/$name.log"
}
stage_summary() {
  echo "=== summary ==="; printf '%s\n' "${summary[@]}" | tee "$OUT/summary.txt"
}
pack_results() {    # every log into one $OUT/results.tgz (the device tool returns 8 files at most)
  (cd "$OUT" && tar czf /tmp/results.tgz --exclude=results.tgz . && rm -rf ./* && mv /tmp/results.tgz .)
}
