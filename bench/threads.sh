#!/usr/bin/env bash
# Thread counts (issue 15: "thread defaults follow the machine's cores"): kvik-server started
# once per (io-threads, workers) pair, all loaded with the same keys, then redis-benchmark runs
# alternating between them (A B C D A B C D ...) for ROUNDS rounds; medians and the ratio of
# each pair against the last one listed (the baseline).
#
#   bench/threads.sh                                   # pairs "1/2 2/2 1/4 2/4", SET and GET, -P 1 and 16
#   PAIRS="2/2 2/4" TESTS=set ROUNDS=5 bench/threads.sh
#
# The idle servers park (docs/benchmarks.md section 4: < 1% of a core each), so the one being
# measured has the machine. Run it under the machine-wide benchmark lock:
#   flock /tmp/kvik-bench.lock bench/threads.sh
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."

ensure_redis
ensure_kvik_bench

PAIRS=${PAIRS:-"1/2 2/2 1/4 2/4"}
ROUNDS=${ROUNDS:-3}
N=${N:-200000}
KEYSPACE=${KEYSPACE:-100000}
TESTS=${TESTS:-set,get}
RESULTS=$BENCH_TMP/results.csv

declare -A PORT
LABELS=()
for pair in $PAIRS; do
  io=${pair%/*} workers=${pair#*/}
  label="io${io}-w${workers}"
  LABELS+=("$label")
  PORT[$label]=$(free_port)
  start_kvik "${PORT[$label]}" "$label" --io-threads "$io" --workers "$workers"
  "$KVIK_BENCH" -p "${PORT[$label]}" -q -c 50 -P 16 -r "$KEYSPACE" --dist seq -n "$KEYSPACE" \
    -t set >/dev/null
done
echo "load before: $(uptime | sed 's/.*load average: //')"
for round in $(seq 1 "$ROUNDS"); do
  for label in "${LABELS[@]}"; do
    for pipeline in 1 16; do
      n=$N; [ "$pipeline" = 16 ] && n=$((N * 4))
      run_rb "${PORT[$label]}" "$label" -t "$TESTS" -c 50 -r "$KEYSPACE" -n "$n" \
        -P "$pipeline" --precision 3
    done
    echo "  round $round $label done"
  done
done
# -P 16 rows are told apart by their request count in redis-benchmark's CSV test name only
# when it prints one; sort them by rps instead: run_rb appends in run order, P1 then P16.
python3 - "$RESULTS" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
seen = {}
out = []
for r in rows:
    key = (r[0], r[1])
    seen[key] = seen.get(key, 0) + 1
    r[1] = f"{r[1]} -P {'1' if seen[key] % 2 == 1 else '16'}"
    out.append(r)
csv.writer(open(sys.argv[1], "w")).writerows(out)
PY
summarize "${LABELS[@]}"
