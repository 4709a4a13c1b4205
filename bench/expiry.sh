#!/usr/bin/env bash
# Issue 14: does active expiry keep up with keys written with a short TTL? Each side gets a
# sustained open-loop load of SET key:<random> <20 B> EX $TTL at $RATE requests/s for $SECS
# seconds (kvik-bench --rate, 20 clients, keys never repeat), DBSIZE and INFO expired_keys
# sampled every second; then the time until DBSIZE reaches 0 after the load (at most 60 s).
# Keys live TTL seconds, so a server that keeps up holds about RATE x TTL keys (plus what its
# cycle has not reached yet); one that does not grows by the difference, on disk, for as long as
# the load lasts. Sides alternate (kvik, [kvik-base], redis-aof) for ROUNDS rounds.
#
#   bench/expiry.sh                                  # 30k and 50k/s, 30 s, 2 rounds, ~8 min
#   RATES="30000" SECS=10 ROUNDS=1 bench/expiry.sh   # what `make bench` runs (QUICK=1)
#   BASE_BIN=/path/to/other/kvik-server bench/expiry.sh   # another build as a side too
#
# Run it under the machine-wide benchmark lock: flock /tmp/kvik-bench.lock bench/expiry.sh
source "$(dirname "$0")/lib.sh"
ensure_redis
ensure_kvik_bench

if [ "$QUICK" = 1 ]; then
  RATES=${RATES:-30000} SECS=${SECS:-10} ROUNDS=${ROUNDS:-1}
fi
RATES=${RATES:-30000 50000}
SECS=${SECS:-30}
ROUNDS=${ROUNDS:-2}
TTL=${TTL:-2}

expired_keys() { redis-cli -p "$1" info stats | tr -d '\r' | sed -n 's/^expired_keys://p'; }

wave() { # side rate round
  local side=$1 rate=$2 round=$3 pid peak=0 size t0 c0 c1 e0 e1 drained=60 out
  case $side in
    kvik) BACKEND_PORT=$(free_port); start_kvik "$BACKEND_PORT" "$side$round" ;;
    kvik-base) BACKEND_PORT=$(free_port); KVIK_BIN=$BASE_BIN start_kvik "$BACKEND_PORT" "$side$round" ;;
    redis-aof) BACKEND_PORT=$(free_port)
      start_redis "$BACKEND_PORT" "$side$round" --appendonly yes --appendfsync everysec ;;
  esac
  pid=${PIDS[-1]}
  local port=$BACKEND_PORT
  out="$BENCH_TMP/$side$round.kb"
  c0=$(cpu_ticks "$pid"); e0=$(expired_keys "$port"); t0=$SECONDS
  "$KVIK_BENCH" -p "$port" -c 20 --rate "$rate" --duration "${SECS}s" -r 1000000000000 -q \
    SET key:__rand_int__ xxxxxxxxxxxxxxxxxxxx EX "$TTL" >"$out" 2>&1 &
  local kb=$!
  while kill -0 "$kb" 2>/dev/null; do
    sleep 1
    size=$(redis-cli -p "$port" dbsize)
    [ "$size" -gt "$peak" ] && peak=$size
  done
  wait "$kb"
  local at_end=$size
  for i in $(seq 60); do
    if [ "$(redis-cli -p "$port" dbsize)" = 0 ]; then drained=$i; break; fi
    sleep 1
  done
  c1=$(cpu_ticks "$pid"); e1=$(expired_keys "$port")
  local disk
  disk=$(du -sm "$BENCH_TMP/$side$round" | cut -f1)
  printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$side" "$rate" "$peak" "$at_end" \
    "$( ((drained == 60)) && echo '> 60' || echo "$drained")" \
    "$(python3 -c "print(f'{($e1 - $e0) / ($SECONDS - $t0):,.0f}')")" \
    "$(sed -n 's/.*p50=\([0-9.]*\).*/\1/p' "$out" | tail -1)" \
    "$(python3 -c "print(f'{($c1 - $c0) / $(getconf CLK_TCK):.1f} s, {$disk} MB')")"
  kill "$pid"; wait "$pid" 2>/dev/null || true
  rm -rf "${BENCH_TMP:?}/$side$round"
}

SIDES="kvik ${BASE_BIN:+kvik-base} redis-aof"
echo "machine: $(nproc) cores; load: $(uptime | sed 's/.*load average/load average/')"
echo "SET EX $TTL at RATES=$RATES for ${SECS}s; sides: $SIDES; $ROUNDS rounds"
echo
echo "| side | SET EX/s | peak DBSIZE | DBSIZE at the load's end | s to 0 after | expired/s over the run | write p50 ms | server CPU, disk after |"
echo "|---|---|---|---|---|---|---|---|"
for round in $(seq "$ROUNDS"); do
  for rate in $RATES; do
    for side in $SIDES; do
      wave "$side" "$rate" "$round"
    done
  done
done
