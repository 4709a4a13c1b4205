#!/usr/bin/env bash
# Issue 14: what keeping the key counts and the expiry index costs a write (a point read of the
# key's state at commit, and a merge operand when a key is created or deleted). SET of new keys
# (--dist seq: every SET creates its key) and SET over existing keys, -P 1 and -P 16, this
# build against BASE_BIN, alternating (A B A B ...) on fresh servers; prints the medians.
#
#   BASE_BIN=/path/to/main/kvik-server bench/count_write.sh      # ~3 min
#   ROUNDS=5 N=200000 BASE_BIN=... bench/count_write.sh
#
# Run it under the machine-wide benchmark lock: flock /tmp/kvik-bench.lock bench/count_write.sh
source "$(dirname "$0")/lib.sh"

: "${BASE_BIN:?set BASE_BIN to the kvik-server to compare with}"
ROUNDS=${ROUNDS:-3}
N=${N:-100000}
RESULTS=$BENCH_TMP/results.csv

run() { # label port pipeline name
  local rps
  rps=$("$KVIK_BENCH" -p "$2" -q -t set -n "$N" -r "$N" --dist seq -d 100 -c 50 -P "$3" |
    grep -oE '[0-9.]+ requests per second' | cut -d' ' -f1)
  echo "$1,$4 -P $3,$rps" >>"$RESULTS"
}

echo "machine: $(nproc) cores; load: $(uptime | sed 's/.*load average/load average/')"
for round in $(seq 1 "$ROUNDS"); do
  for side in this base; do
    bin=$KVIK_BIN; [ "$side" = base ] && bin=$BASE_BIN
    port=$(free_port)
    KVIK_BIN=$bin start_kvik "$port" "$side$round"
    pid=${PIDS[-1]}
    for p in 1 16; do
      redis-cli -p "$port" flushall >/dev/null
      run "$side" "$port" "$p" "SET new"
      run "$side" "$port" "$p" "SET overwrite"
    done
    kill "$pid"; wait "$pid" 2>/dev/null || true
  done
done
python3 - "$RESULTS" <<'PY'
import csv, statistics, sys
rows = {}
for side, test, rps in csv.reader(open(sys.argv[1])):
    rows.setdefault((test, side), []).append(float(rps))
print("| test | this rps | base rps | this/base |")
print("|---|---|---|---|")
for test in sorted({t for t, _ in rows}):
    a, b = statistics.median(rows[(test, "this")]), statistics.median(rows[(test, "base")])
    print(f"| {test} | {a:,.0f} | {b:,.0f} | {a / b:.2f} |")
PY
