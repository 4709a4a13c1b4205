#!/usr/bin/env bash
# Quick commands beside slow ones: GET and SET (kvik-bench -c 50 -r N, SECS each) alone, then while
# LOOPS clients loop `KEYS nomatch*` over a keyspace of N keys, on kvik (its slow lane on, the
# default), kvik with `slow-lane-threads 0` (slow commands share the workers) and redis-server;
# each side loaded once with the same keys, rounds alternating the sides. Prints requests per
# second and the KEYS calls per second the loops got meanwhile.
#
#   bench/slow_commands.sh                   # N=1000000, 3 rounds
#   N=200000 ROUNDS=1 bench/slow_commands.sh
#
# Run it under the machine-wide benchmark lock: flock /tmp/kvik-bench.lock bench/slow_commands.sh
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."

ensure_redis
ensure_kvik_bench
N=${N:-1000000}
ROUNDS=${ROUNDS:-3}
LOOPS=${LOOPS:-4}
SECS=${SECS:-5}
sides=(kvik kvik-no-lane redis)
declare -A port
for side in "${sides[@]}"; do
  port[$side]=$(free_port)
  case $side in
    kvik) start_kvik "${port[$side]}" "$side" ;;
    kvik-no-lane) start_kvik "${port[$side]}" "$side" --slow-lane-threads 0 ;;
    redis) start_redis "${port[$side]}" "$side" ;;
  esac
  echo "loading $N keys x 100 B into $side" >&2
  "$KVIK_BENCH" -p "${port[$side]}" -q -t set -n "$N" -r "$N" --dist seq -d 100 -c 50 -P 16 >/dev/null
  [ "$side" = redis ] || settle "${port[$side]}" 120
done

# rb port: "GET rps SET rps", each from a kvik-bench run of SECS seconds (-c 50 -r N).
rb() {
  local t out=()
  for t in get set; do
    out+=("$("$KVIK_BENCH" -p "$1" -q -t "$t" -r "$N" -c 50 --duration "${SECS}s" |
      sed -n 's/.*: \([0-9.]*\) requests per second.*/\1/p' | awk '{printf "%.0f", $1}')")
  done
  echo "${out[*]}"
}
keys_calls() {
  local n
  n=$(redis-cli -p "$1" INFO commandstats | tr -d '\r' | sed -n 's/^cmdstat_keys:calls=\([0-9]*\),.*/\1/p')
  echo "${n:-0}"
}

echo "machine: $(nproc) cores; $N keys; $LOOPS clients looping KEYS nomatch*; kvik-bench -c 50 -r $N --duration ${SECS}s -t get, then -t set"
echo "| round | side | GET alone | SET alone | GET beside KEYS | SET beside KEYS | KEYS calls/s |"
echo "|---|---|---|---|---|---|---|"
for round in $(seq 1 "$ROUNDS"); do
  for side in "${sides[@]}"; do
    p=${port[$side]}
    read -r get_alone set_alone <<<"$(rb "$p")"
    stop=$BENCH_TMP/stop-keys
    rm -f "$stop"
    loops=()
    for _ in $(seq 1 "$LOOPS"); do
      (while [ ! -e "$stop" ]; do redis-cli -p "$p" KEYS 'nomatch*' >/dev/null; done) &
      loops+=($!)
    done
    sleep 1
    k0=$(keys_calls "$p")
    t0=$(date +%s.%N)
    read -r get_beside set_beside <<<"$(rb "$p")"
    k1=$(keys_calls "$p")
    t1=$(date +%s.%N)
    touch "$stop"
    wait "${loops[@]}" 2>/dev/null || true
    keys_rate=$(awk "BEGIN {printf \"%.1f\", ($k1 - $k0) / ($t1 - $t0)}")
    echo "| $round | $side | $get_alone | $set_alone | $get_beside | $set_beside | $keys_rate |"
  done
done
