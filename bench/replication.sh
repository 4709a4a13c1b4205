#!/usr/bin/env bash
# Issue 19: what replicas cost their primary, how far behind they run, how long a full sync
# takes and what the primary serves meanwhile; kvik-server and redis-server side by side.
#
# 1. SET throughput on a primary with 0, 1 and 2 replicas attached (fresh servers each time,
#    alternating kvik 0, redis 0, kvik 1, redis 1, kvik 2, redis 2 per round; -P 1 and -P 16,
#    DUR seconds each) and the replicas' lag under that load: bench/repl_lag.py writes a
#    sentinel key on the primary every 20 ms and times from the primary's reply until every
#    replica serves it (p99). Prints medians over the rounds and the ratios to 0 replicas.
# 2. Full sync: loads SYNC_MB of 1 KB values into a primary, measures its SET rps under a
#    background load (10 clients, -P 1), then starts a replica under the same load and times
#    until the replica's link is up (checkpoint or RDB made, sent, loaded); prints seconds per
#    GB and the primary's rps during the sync (from total_commands_processed) against before.
#
#   bench/replication.sh                 # full: ROUNDS=3 DUR=10 SYNC_MB=1024 (~12 min)
#   QUICK=1 bench/replication.sh         # make bench: ROUNDS=3 DUR=2 SYNC_MB=64 (~3 min)
#   AB=1 bench/replication.sh            # part 1 only, kvik's backlog on (repl-backlog-size
#                                        # default) against off (0: replicas tail the WAL file),
#                                        # alternating per round; the columns "kvik-wal" are off
#
# redis-server runs without persistence (lib.sh), with repl-diskless-sync-delay 0 so its full
# sync starts at once; kvik with its WAL (appendfsync everysec). Every wait is bounded.
# Run it under the machine-wide benchmark lock: flock /tmp/kvik-bench.lock bench/replication.sh
source "$(dirname "$0")/lib.sh"

if [ "$QUICK" = 1 ]; then
  ROUNDS=${ROUNDS:-3} DUR=${DUR:-2} SYNC_MB=${SYNC_MB:-64}
else
  ROUNDS=${ROUNDS:-3} DUR=${DUR:-10} SYNC_MB=${SYNC_MB:-1024}
fi
BEFORE=${BEFORE:-5}             # seconds the primary's rps is sampled before a full sync
SYNC_TIMEOUT=${SYNC_TIMEOUT:-600}
LAG=$(dirname "$0")/repl_lag.py
RESULTS=$BENCH_TMP/results.csv
# The two sides compared: kvik against redis-server, or (AB=1) kvik with its replication backlog
# against kvik without it ("kvik-wal": repl-backlog-size 0 on the primary).
if [ "${AB:-0}" = 1 ]; then SIDES=(kvik kvik-wal); else SIDES=(kvik redis); fi

field() { # port name
  redis-cli -p "$1" info replication | tr -d '\r' | sed -n "s/^$2://p"
}

commands() { # port: total_commands_processed
  redis-cli -p "$1" info stats | tr -d '\r' | sed -n 's/^total_commands_processed://p'
}

start_node() { # kind port name [primary-port]
  local kind=$1 port=$2 name=$3
  if [ -z "${4:-}" ]; then
    case $kind in
      redis) start_redis "$port" "$name" --repl-diskless-sync-delay 0 ;;
      kvik-wal) start_kvik "$port" "$name" --repl-backlog-size 0 ;;
      *) start_kvik "$port" "$name" ;;
    esac
  elif [ "$kind" != redis ]; then
    start_kvik "$port" "$name" --replicaof "127.0.0.1 $4"
  else
    start_redis "$port" "$name" --replicaof 127.0.0.1 "$4"
  fi
}

wait_link_up() { # replica-port timeout-seconds
  local until=$(($(date +%s) + $2))
  until [ "$(field "$1" master_link_status)" = up ]; do
    if [ "$(date +%s)" -ge "$until" ]; then
      echo "replica on port $1: no link after $2 s" >&2
      return 1
    fi
    sleep 0.05
  done
}

echo "machine: $(nproc) cores; load: $(uptime | sed 's/.*load average/load average/')"
echo "== SET with 0, 1, 2 replicas (DUR=$DUR s, $ROUNDS rounds)"
for round in $(seq 1 "$ROUNDS"); do
  for replicas in 0 1 2; do
    for kind in "${SIDES[@]}"; do
      port=$(free_port)
      start_node "$kind" "$port" "$kind-p$replicas-$round"
      pids=(${PIDS[-1]})
      rports=()
      for i in $(seq 1 "$replicas"); do
        rport=$(free_port)
        start_node "$kind" "$rport" "$kind-r$i-$replicas-$round" "$port"
        pids+=(${PIDS[-1]})
        rports+=("$rport")
      done
      for rport in "${rports[@]}"; do wait_link_up "$rport" 60; done
      for p in 1 16; do
        stop=$BENCH_TMP/lag-stop lagout=$BENCH_TMP/lag-out
        rm -f "$stop" "$lagout" "$lagout.ready"
        lagpid=
        if [ "$replicas" -gt 0 ]; then
          python3 "$LAG" "$port" "$(IFS=,; echo "${rports[*]}")" "$stop" "$lagout" &
          lagpid=$!
          for _ in $(seq 1 200); do [ -e "$lagout.ready" ] && break; sleep 0.05; done
        fi
        rps=$("$KVIK_BENCH" -p "$port" -q -t set -r 100000 -d 100 -c 50 -P "$p" --duration "${DUR}s" |
          grep -oE '[0-9.]+ requests per second' | cut -d' ' -f1)
        echo "$kind $replicas,SET -P $p rps,$rps" >>"$RESULTS"
        if [ -n "$lagpid" ]; then
          touch "$stop"
          wait "$lagpid"
          read -r n p50 p99 max <"$lagout"
          echo "$kind $replicas,lag p99 ms under SET -P $p,$p99" >>"$RESULTS"
          echo "  $kind $replicas replicas -P $p: $rps rps; lag ms p50 $p50 p99 $p99 max $max ($n samples)"
        else
          echo "  $kind 0 replicas -P $p: $rps rps"
        fi
      done
      kill "${pids[@]}"; wait "${pids[@]}" 2>/dev/null || true
    done
  done
done
python3 - "$RESULTS" "${SIDES[@]}" <<'PY'
import csv, statistics, sys
a, b = sys.argv[2], sys.argv[3]
rows = {}
for side, test, v in csv.reader(open(sys.argv[1])):
    rows.setdefault((test, side), []).append(float(v))
m = lambda t, s: statistics.median(rows[(t, s)]) if (t, s) in rows else float("nan")
print(f"| test | {a} 0 | {a} 1 | {a} 2 | {a} 1/0 | {a} 2/0 | {b} 0 | {b} 1 | {b} 2 | {b} 1/0 | {b} 2/0 |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for t in sorted({t for t, _ in rows if t.startswith("SET")}):
    k = [m(t, f"{a} {n}") for n in range(3)]
    r = [m(t, f"{b} {n}") for n in range(3)]
    print(f"| {t} | {k[0]:,.0f} | {k[1]:,.0f} | {k[2]:,.0f} | {k[1]/k[0]:.2f} | {k[2]/k[0]:.2f} "
          f"| {r[0]:,.0f} | {r[1]:,.0f} | {r[2]:,.0f} | {r[1]/r[0]:.2f} | {r[2]/r[0]:.2f} |")
for t in sorted({t for t, _ in rows if t.startswith("lag")}):
    k = [m(t, f"{a} {n}") for n in (1, 2)]
    r = [m(t, f"{b} {n}") for n in (1, 2)]
    print(f"| {t} | | {k[0]:.1f} | {k[1]:.1f} | | | | {r[0]:.1f} | {r[1]:.1f} | | |")
PY

# The backlog changes nothing in a full sync: the A/B run stops here.
[ "${AB:-0}" = 1 ] && exit 0

echo "== full sync of $SYNC_MB MB while the primary serves SET (-c 10 -P 1)"
keys=$((SYNC_MB * 1024))
for kind in kvik redis; do
  port=$(free_port)
  start_node "$kind" "$port" "$kind-sync-primary"
  ppid=${PIDS[-1]}
  "$KVIK_BENCH" -p "$port" -q -t set -n "$keys" -r "$keys" --dist seq -d 1000 -c 50 -P 16 >/dev/null
  [ "$kind" = kvik ] && sleep 2 # the counts' fold
  load() { # seconds: a background SET load on the primary
    "$KVIK_BENCH" -p "$port" -q -t set -r 100000 -d 100 -c 10 -P 1 --duration "$1s" \
      >/dev/null 2>&1 &
    loadpid=$!
    PIDS+=("$loadpid")
    sleep 1
  }
  load $((BEFORE + 2))
  c0=$(commands "$port") t0=$(date +%s.%N)
  sleep "$BEFORE"
  c1=$(commands "$port") t1=$(date +%s.%N)
  wait "$loadpid" 2>/dev/null || true
  load "$SYNC_TIMEOUT"
  rport=$(free_port)
  c2=$(commands "$port") start=$(date +%s.%N)
  start_node "$kind" "$rport" "$kind-sync-replica" "$port"
  rpid=${PIDS[-1]}
  wait_link_up "$rport" "$SYNC_TIMEOUT"
  c3=$(commands "$port") end=$(date +%s.%N)
  kill "$loadpid" 2>/dev/null || true
  wait "$loadpid" 2>/dev/null || true
  dbsize=$(redis-cli -p "$rport" dbsize)
  python3 -c "
s = $end - $start
before = ($c1 - $c0) / ($t1 - $t0)
during = ($c3 - $c2) / s
print(f'$kind: full sync of $SYNC_MB MB ($keys keys of 1 KB, replica dbsize $dbsize): {s:.1f} s, '
      f'{s * 1024 / $SYNC_MB:.1f} s per GB; primary SET rps before {before:,.0f}, '
      f'during {during:,.0f} ({during / before:.2f})')"
  kill "$ppid" "$rpid"; wait "$ppid" "$rpid" 2>/dev/null || true
done
