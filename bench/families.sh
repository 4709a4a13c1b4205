#!/usr/bin/env bash
# Bitmaps, HyperLogLog and geo (issue 17): SETBIT, GETBIT, BITCOUNT, PFADD, PFCOUNT, GEOADD and
# GEOSEARCH at -c 50, measured with redis-benchmark's custom commands (kvik-bench has no
# templates for them) against kvik and redis-server (no persistence), run alternately (kvik,
# redis, kvik, ...) for ROUNDS rounds; prints medians and the ratio kvik/redis.
#
# The data each command meets: one bitmap `bm` of BITS bits with BITS/10 of them set at random
# (1M bits is 125 KB, so kvik keeps it segmented: a SETBIT writes one 4 KiB segment), many
# small bitmaps `bm:<n>` (inline strings), one HyperLogLog (PFADD of random elements: dense
# after a few thousand), one geo index of random points in a one-degree square (GEOADD)
# searched for its 10 nearest within 10 km. redis-benchmark's __rand_int__ is zero-padded,
# which no bit offset accepts, so SETBIT/GETBIT rows use a fixed offset (a random key for the
# small ones) and the warm-up sets random bits through redis-cli --pipe.
#
#   bench/families.sh                     # full: 3 rounds, N=100000
#   QUICK=1 bench/families.sh             # quick: 3 rounds, N=20000
#   ROUNDS=1 N=2000 bench/families.sh     # smoke run
#   OFF=1 bench/families.sh         # adds kvik-off: --rtc-write no (every command on a worker)
#
# Run it under the machine-wide benchmark lock: flock /tmp/kvik-bench.lock bench/families.sh
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."

ensure_redis

if [ "${QUICK:-0}" = 1 ]; then N=${N:-20000}; else N=${N:-100000}; fi
ROUNDS=${ROUNDS:-3}
CLIENTS=${CLIENTS:-50}
BITS=${BITS:-1000000}
POINTS=${POINTS:-100000}
RESULTS=$BENCH_TMP/results.csv

# One command line per row; __rand_int__ is redis-benchmark's random number (0..-r), 12 digits
# zero-padded, so "13.__rand_int__" is a longitude between 13 and 14.
COMMANDS=(
  "SETBIT bm 777777 1"
  "SETBIT bm:__rand_int__ 100 1"
  "GETBIT bm 777777"
  "BITCOUNT bm"
  "BITCOUNT bm 0 1000"
  "PFADD hll el:__rand_int__"
  "PFCOUNT hll"
  "GEOADD geo 13.__rand_int__ 38.__rand_int__ m:__rand_int__"
  "GEOSEARCH geo FROMLONLAT 13.5 38.5 BYRADIUS 10 km COUNT 10 ASC"
)

declare -A PORT
SIDES=(kvik redis)
[ "${OFF:-0}" = 1 ] && SIDES=(kvik kvik-off redis)
for side in "${SIDES[@]}"; do PORT[$side]=$(free_port); done
start_kvik "${PORT[kvik]}" kvik
[ "${OFF:-0}" = 1 ] && start_kvik "${PORT[kvik-off]}" kvik-off --rtc-write no
start_redis "${PORT[redis]}" redis

# Warm-up: the bitmap, the HLL and the geo index exist and have their size before anything is
# measured (-r bounds the random numbers: offsets, elements, points).
for side in "${SIDES[@]}"; do
  p=${PORT[$side]}
  python3 -c "
import random, sys
random.seed(17)
for _ in range($BITS // 10):
    sys.stdout.write('SETBIT bm %d 1\r\n' % random.randrange($BITS))
" | redis-cli -p "$p" --pipe >/dev/null
  redis-benchmark -p "$p" -q -c 50 -n 50000 -r 1000000 PFADD hll el:__rand_int__ >/dev/null
  redis-benchmark -p "$p" -q -c 50 -n "$POINTS" -r "$POINTS" \
    GEOADD geo 13.__rand_int__ 38.__rand_int__ m:__rand_int__ >/dev/null
done

echo "machine: $(nproc) cores, $(uname -srm); $(redis-server --version | cut -d' ' -f1-3); load: $(uptime | sed 's/.*load average: //')"
echo "command: redis-benchmark --csv -n $N -c $CLIENTS -r <1000000|points> <command>; $ROUNDS rounds, alternating ${SIDES[*]}"
for round in $(seq 1 "$ROUNDS"); do
  for side in "${SIDES[@]}"; do
    for cmd in "${COMMANDS[@]}"; do
      case "$cmd" in
        GEO*) range=$POINTS ;;
        *) range=1000000 ;;
      esac
      # shellcheck disable=SC2086 # the command line is split into its arguments on purpose
      run_rb "${PORT[$side]}" "$side" -n "$N" -c "$CLIENTS" -r "$range" $cmd
    done
  done
done
summarize "${SIDES[@]}"
