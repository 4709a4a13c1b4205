#!/usr/bin/env bash
# Issue 14: does active expiry keep up with keys written with a short TTL? Each side gets a
# sustained open-loop load of SET key:<random> <20 B> EX $TTL at $RATE requests/s for $SECS
# seconds (kvik-bench --rate, 20 clients, keys never repeat), DBSIZE and INFO expired_keys
# sampled every second; then the time until DBSIZE reaches 0 after the load (at most 60 s).
# Keys live TTL seconds, so a server that keeps up holds about RATE x TTL keys (plus what its
# cycle has not reached yet); one that does not grows by the difference, on disk, for as long as
# the load lasts. Sides alternate (kvik, [kvik-base], redis-aof) for ROUNDS rounds.
#
# KIND=fields does the same with hash fields: each request is a script that writes a new hash of
# 10 fields and gives all of them a TTL of TTL seconds (HSET + HPEXPIRE), so RATE requests/s is
# 10 x RATE fields/s; DBSIZE counts the hashes with a field left, expired/s counts fields (INFO
# expired_subkeys). No redis-server side: Debian's (7.0) has no HEXPIRE.
#
#   bench/expiry.sh                                  # 30k and 50k/s, 30 s, 2 rounds, ~8 min
#   RATES="30000" SECS=10 ROUNDS=1 bench/expiry.sh   # what `make bench` runs (QUICK=1)
#   BASE_BIN=/path/to/other/kvik-server bench/expiry.sh   # another build as a side too
#   KIND=fields RATES="5000 8000" bench/expiry.sh    # hash fields: 50k and 80k fields/s
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
KIND=${KIND:-keys}

case $KIND in
  keys) EXPIRED_STAT=expired_keys ;;
  fields) EXPIRED_STAT=expired_subkeys ;;
  *) echo "KIND is keys or fields, not $KIND" >&2; exit 1 ;;
esac
FIELDS_SCRIPT="local f = {} for i = 1, 10 do f[#f + 1] = 'f' .. i f[#f + 1] = ARGV[1] end
redis.call('HSET', KEYS[1], unpack(f))
return redis.call('HPEXPIRE', KEYS[1], ARGV[2], 'FIELDS', 10, 'f1', 'f2', 'f3', 'f4', 'f5', 'f6', 'f7', 'f8', 'f9', 'f10')"

expired_keys() { redis-cli -p "$1" info stats | tr -d '\r' | sed -n "s/^$EXPIRED_STAT://p"; }

# The load's command on the server on port $1.
load_command() {
  if [ "$KIND" = fields ]; then
    echo EVALSHA "$(redis-cli -p "$1" script load "$FIELDS_SCRIPT")" 1 hash:__rand_int__ \
      xxxxxxxxxxxxxxxxxxxx $((TTL * 1000))
  else
    echo SET key:__rand_int__ xxxxxxxxxxxxxxxxxxxx EX "$TTL"
  fi
}

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
  # shellcheck disable=SC2046 # the command's words
  "$KVIK_BENCH" -p "$port" -c 20 --rate "$rate" --duration "${SECS}s" -r 1000000000000 -q \
    $(load_command "$port") >"$out" 2>&1 &
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
WRITE="SET EX"
if [ "$KIND" = fields ]; then
  SIDES="kvik ${BASE_BIN:+kvik-base}"
  WRITE="hashes of 10 fields with a TTL"
fi
echo "machine: $(nproc) cores; load: $(uptime | sed 's/.*load average/load average/')"
echo "$WRITE ($TTL s) at RATES=$RATES for ${SECS}s; sides: $SIDES; $ROUNDS rounds"
echo
echo "| side | $WRITE/s | peak DBSIZE | DBSIZE at the load's end | s to 0 after | $KIND expired/s over the run | write p50 ms | server CPU, disk after |"
echo "|---|---|---|---|---|---|---|---|"
for round in $(seq "$ROUNDS"); do
  for rate in $RATES; do
    for side in $SIDES; do
      wave "$side" "$rate" "$round"
    done
  done
done
