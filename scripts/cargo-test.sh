#!/usr/bin/env bash
# Runs `cargo test` with the given arguments, keeps its output and exit status, and ends with one
# line that totals every test binary ("tests: N passed, M failed, K skipped"; ignored tests count as skipped), so the last line of
# a run says how many tests ran even when the last binary cargo ran was an empty doc-test.
set -uo pipefail
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
awk '/^test result:/ {
        for (i = 1; i <= NF; i++) {
          if ($(i) ~ /^passed;?$/) p += $(i-1)
          if ($(i) ~ /^failed;?$/) f += $(i-1)
          if ($(i) ~ /^ignored;?$/) g += $(i-1)
        }
      }
      END { printf "tests: %d passed, %d failed, %d skipped\n", p, f, g }' "$log"
exit "$status"
