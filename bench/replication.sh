#!/usr/bin/env bash
# Issue 19: what a replica costs its primary, and how long a full sync takes.
#
# 1. SET throughput on the primary with 0 and with 1 replica attached, alternating (0 1 0 1 ...)
#    on fresh servers, -P 1 and -P 16; prints the medians and the ratio.
# 2. Full sync: loads SYNC_MB of 1 KB values into a primary, starts a replica, and times until
#    the replica's link is up and its offset reached the primary's; prints seconds per GB.
#
#   bench/replication.sh                       # ~3 min
#   ROUNDS=5 N=200000 SYNC_MB=1024 bench/replication.sh
#
# Run it under the machine-wide benchmark lock: flock /tmp/kvik-bench.lock bench/replication.sh
source "$(dirname "$0")/lib.sh"

ROUNDS=${ROUNDS:-3}
N=${N:-100000}
SYNC_MB=${SYNC_MB:-256}
RESULTS=$BENCH_TMP/results.csv

field() { # port name
  redis-cli -p "$1" info replication | tr -d '\r' | sed -n "s/^$2://p"
}

run() { # label port pipeline
  local rps
  rps=$("$KVIK_BENCH" -p "$2" -q -t set -n "$N" -r "$N" -d 100 -c 50 -P "$3" |
    grep -oE '[0-9.]+ requests per second' | cut -d' ' -f1)
  echo "$1,SET -P $3,$rps" >>"$RESULTS"
}

echo "machine: $(nproc) cores; load: $(uptime | sed 's/.*load average/load average/')"
for round in $(seq 1 "$ROUNDS"); do
  for replicas in 0 1; do
    port=$(free_port)
    start_kvik "$port" "p$replicas-$round"
    ppid=${PIDS[-1]}
    rpid=
    if [ "$replicas" = 1 ]; then
      rport=$(free_port)
      start_kvik "$rport" "r$round" --replicaof "127.0.0.1 $port"
      rpid=${PIDS[-1]}
      until [ "$(field "$rport" master_link_status)" = up ]; do sleep 0.1; done
    fi
    for p in 1 16; do
      run "$replicas replica(s)" "$port" "$p"
    done
    kill "$ppid" $rpid; wait "$ppid" $rpid 2>/dev/null || true
  done
done
python3 - "$RESULTS" <<'PY'
import csv, statistics, sys
rows = {}
for side, test, rps in csv.reader(open(sys.argv[1])):
    rows.setdefault((test, side), []).append(float(rps))
print("| test | 0 replicas rps | 1 replica rps | 1/0 |")
print("|---|---|---|---|")
for test in sorted({t for t, _ in rows}):
    a, b = statistics.median(rows[(test, "0 replica(s)")]), statistics.median(rows[(test, "1 replica(s)")])
    print(f"| {test} | {a:,.0f} | {b:,.0f} | {b / a:.2f} |")
PY

keys=$((SYNC_MB * 1024))
port=$(free_port)
start_kvik "$port" sync-primary
"$KVIK_BENCH" -p "$port" -q -t set -n "$keys" -r "$keys" --dist seq -d 1000 -c 50 -P 16 >/dev/null
sleep 2 # the counts' fold
rport=$(free_port)
start=$(date +%s.%N)
start_kvik "$rport" sync-replica --replicaof "127.0.0.1 $port"
while :; do
  if [ "$(field "$rport" master_link_status)" = up ] &&
    [ "$(field "$rport" master_repl_offset)" -ge "$(field "$port" master_repl_offset)" ]; then
    break
  fi
  sleep 0.05
done
end=$(date +%s.%N)
dbsize=$(redis-cli -p "$rport" dbsize)
python3 -c "
s = $end - $start
print(f'full sync of {$SYNC_MB} MB of values ({$keys} keys, replica dbsize $dbsize): {s:.1f} s, {s * 1024 / $SYNC_MB:.1f} s per GB')"
