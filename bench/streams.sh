#!/usr/bin/env bash
# Streams (issue 17): XADD, XREADGROUP and XACK at -c 50, measured with redis-benchmark against
# kvik and redis-server (no persistence), run alternately (kvik, redis, kvik, ...) for ROUNDS
# rounds; prints medians (rps, p50/p99 ms) and the ratio kvik/redis.
#
# Each round, on each side: XADD appends N entries to `s:add` (auto IDs); then `s:grp` is filled
# with N entries of explicit IDs 1-1 .. 1-N (redis-cli --pipe, not measured), XREADGROUP COUNT 1
# delivers them one per call to consumer c (each call a PEL insert), and XACK acknowledges
# random IDs 1-1 .. 1-N (most of them pending on the first ack).
#
#   bench/streams.sh                  # full: 3 rounds, N=100000
#   QUICK=1 bench/streams.sh          # quick: 3 rounds, N=20000
#   OFF=1 bench/streams.sh          # adds kvik-off: --rtc-write no (every command on a worker)
#
# Run it under the machine-wide benchmark lock: flock /tmp/kvik-bench.lock bench/streams.sh
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."

ensure_redis

if [ "${QUICK:-0}" = 1 ]; then N=${N:-20000}; else N=${N:-100000}; fi
ROUNDS=${ROUNDS:-3}
CLIENTS=${CLIENTS:-50}
RESULTS=$BENCH_TMP/results.csv

declare -A PORT
SIDES=(kvik redis)
[ "${OFF:-0}" = 1 ] && SIDES=(kvik kvik-off redis)
for side in "${SIDES[@]}"; do PORT[$side]=$(free_port); done
start_kvik "${PORT[kvik]}" kvik
[ "${OFF:-0}" = 1 ] && start_kvik "${PORT[kvik-off]}" kvik-off --rtc-write no
start_redis "${PORT[redis]}" redis

# fill_group port: a fresh `s:grp` with N explicit-ID entries and group g reading from 0.
fill_group() {
  local port=$1
  redis-cli -p "$port" del s:grp >/dev/null
  seq 1 "$N" | awk '{ printf "*5\r\n$4\r\nXADD\r\n$5\r\ns:grp\r\n$%d\r\n1-%d\r\n$1\r\nf\r\n$1\r\nv\r\n", length($1) + 2, $1 }' |
    redis-cli -p "$port" --pipe >/dev/null
  redis-cli -p "$port" xgroup create s:grp g 0 >/dev/null
}

echo "machine: $(nproc) cores, $(uname -srm); $(redis-server --version | cut -d' ' -f1-3); load: $(uptime | sed 's/.*load average: //')"
echo "command: redis-benchmark -n $N -c $CLIENTS <XADD | XREADGROUP | XACK>; $ROUNDS rounds, alternating ${SIDES[*]}"
for round in $(seq 1 "$ROUNDS"); do
  for side in "${SIDES[@]}"; do
    p=${PORT[$side]}
    run_rb "$p" "$side" -n "$N" -c "$CLIENTS" XADD s:add '*' field value
    fill_group "$p"
    run_rb "$p" "$side" -n "$N" -c "$CLIENTS" \
      XREADGROUP GROUP g c COUNT 1 STREAMS s:grp '>'
    run_rb "$p" "$side" -n "$N" -c "$CLIENTS" -r "$N" XACK s:grp g 1-__rand_int__
  done
done
summarize "${SIDES[@]}"
