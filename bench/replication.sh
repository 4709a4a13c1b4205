#!/usr/bin/env bash
# Issue 19: what a replica costs its primary, and how long a full sync takes.
#
# 1. SET throughput on the primary with 0 and with 1 replica attached, alternating (kvik 0, kvik
#    1, redis 0, redis 1, ...) on fresh servers, -P 1 and -P 16, and how far behind (ms) the
#    replica is when the load ends; prints the medians and the ratios. redis-server runs
#    without persistence (lib.sh); kvik with its WAL (appendfsync everysec).
# 2. Full sync: loads SYNC_MB of 1 KB values into a primary, starts a replica, and times until
#    the replica's link is up and its offset reached the primary's; prints seconds per GB.
#
#   bench/replication.sh                       # ~4 min
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

caught_up_ms() { # primary-port replica-port: ms until the replica's offset reached the primary's
  local t0 t1 target
  t0=$(date +%s%N)
  target=$(field "$1" master_repl_offset)
  until [ "$(field "$2" slave_repl_offset)" -ge "$target" ]; do sleep 0.005; done
  t1=$(date +%s%N)
  echo $(((t1 - t0) / 1000000))
}

echo "machine: $(nproc) cores; load: $(uptime | sed 's/.*load average/load average/')"
for round in $(seq 1 "$ROUNDS"); do
  for kind in kvik redis; do
    for replicas in 0 1; do
      port=$(free_port)
      start_$kind "$port" "$kind-p$replicas-$round"
      ppid=${PIDS[-1]}
      rpid=
      if [ "$replicas" = 1 ]; then
        rport=$(free_port)
        if [ "$kind" = kvik ]; then
          start_kvik "$rport" "$kind-r$round" --replicaof "127.0.0.1 $port"
        else
          start_redis "$rport" "$kind-r$round" --replicaof 127.0.0.1 "$port"
        fi
        rpid=${PIDS[-1]}
        until [ "$(field "$rport" master_link_status)" = up ]; do sleep 0.1; done
      fi
      for p in 1 16; do
        run "$kind $replicas" "$port" "$p"
        if [ "$replicas" = 1 ]; then
          echo "$kind $replicas,catch-up ms after SET -P $p,$(caught_up_ms "$port" "$rport")" >>"$RESULTS"
        fi
      done
      kill "$ppid" $rpid; wait "$ppid" $rpid 2>/dev/null || true
    done
  done
done
python3 - "$RESULTS" <<'PY'
import csv, statistics, sys
rows = {}
for side, test, v in csv.reader(open(sys.argv[1])):
    rows.setdefault((test, side), []).append(float(v))
m = lambda t, s: statistics.median(rows[(t, s)])
print("| test | kvik 0 replicas | kvik 1 replica | kvik 1/0 | redis 0 replicas | redis 1 replica | redis 1/0 |")
print("|---|---|---|---|---|---|---|")
for t in sorted({t for t, _ in rows if t.startswith("SET")}):
    k0, k1, r0, r1 = m(t, "kvik 0"), m(t, "kvik 1"), m(t, "redis 0"), m(t, "redis 1")
    print(f"| {t} rps | {k0:,.0f} | {k1:,.0f} | {k1 / k0:.2f} | {r0:,.0f} | {r1:,.0f} | {r1 / r0:.2f} |")
for t in sorted({t for t, _ in rows if t.startswith("catch-up")}):
    print(f"| {t} (replica behind when the load ends) | | {m(t, 'kvik 1'):.0f} | | | {m(t, 'redis 1'):.0f} | |")
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
