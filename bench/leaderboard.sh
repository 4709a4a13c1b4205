#!/usr/bin/env bash
# A leaderboard's reads on a sorted set of N members: kvik with its queries on the I/O thread
# (`rtc-zset-reads yes`, the default), the same server with `rtc-zset-reads no` (every such
# query on a worker) and redis-server holding the same set, alternated (A B C A B C ...) for ROUNDS rounds;
# redis-benchmark -c 50 at -P 1 and -P 16. Prints medians and ratios against redis-server.
#
# Rows: a player's rank (ZREVRANK) and score (ZSCORE), the top ten (ZREVRANGE 0 9 WITHSCORES,
# and by score: ZREVRANGEBYSCORE +inf -inf WITHSCORES LIMIT 0 10),
# ten from the middle (ZRANGE by rank, through the rank index), the players in a score band
# (ZRANGEBYSCORE ... LIMIT 0 10, and its eleventh page, LIMIT 100 10) and how many there are
# (ZCOUNT). Members are m<12 digits>,
# what redis-benchmark's __rand_int__ writes, at random scores below N.
#
#   bench/leaderboard.sh                   # N=1000000 ROUNDS=3 REQUESTS=100000
#   N=20000 ROUNDS=1 REQUESTS=5000 bench/leaderboard.sh   # smoke run
#
# Given two kvik-server binaries, the kvik sides are those builds (old, new), each with its
# defaults, instead of one server with the switch on and off:
#   bench/leaderboard.sh OLD_BINARY NEW_BINARY
#
# Run it under the machine-wide benchmark lock: flock /tmp/kvik-bench.lock bench/leaderboard.sh
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."

N=${N:-1000000}
ROUNDS=${ROUNDS:-3}
REQUESTS=${REQUESTS:-100000}
RESULTS=$BENCH_TMP/results.csv

if [ $# -eq 0 ]; then
  ensure_redis
  KVIK_PORT=$(free_port)
  start_kvik "$KVIK_PORT" kvik
  REDIS_PORT=$(free_port)
  start_redis "$REDIS_PORT" redis
  SIDES=(kvik kvik-off redis)
  declare -A PORT_OF=([kvik]=$KVIK_PORT [kvik-off]=$KVIK_PORT [redis]=$REDIS_PORT)
else
  start_builds_and_redis "$@"
  SIDES=(old new redis)
  declare -A PORT_OF=([old]=${PORTS[0]} [new]=${PORTS[1]} [redis]=${PORTS[2]})
fi

python3 - "$N" $(printf '%s\n' "${PORT_OF[@]}" | sort -u) <<'PY'
import random, sys
sys.path.insert(0, "bench")
from resp import Conn
n = int(sys.argv[1])
rng = random.Random(1)
scores = [rng.randrange(n) for _ in range(n)]
for port in sys.argv[2:]:
    c = Conn(int(port))
    print("loading %d members on port %s" % (n, port), file=sys.stderr)
    for lo in range(0, n, 1000):
        c.call("ZADD", "lb", *(x for i in range(lo, min(n, lo + 1000))
                               for x in (str(scores[i]), "m%012d" % i)))
    c.call("ZREVRANK", "lb", "m%012d" % (n // 2))  # builds kvik's rank index
PY
for side in "${SIDES[@]}"; do
  [ "$side" = redis ] || settle "${PORT_OF[$side]}" 120
done

MID=$((N / 2))
BAND=$((N / 3))
COMMANDS=(
  "ZREVRANK lb m__rand_int__"
  "ZSCORE lb m__rand_int__"
  "ZREVRANGE lb 0 9 WITHSCORES"
  "ZREVRANGEBYSCORE lb +inf -inf WITHSCORES LIMIT 0 10"
  "ZRANGE lb $MID $((MID + 9))"
  "ZRANGEBYSCORE lb $BAND +inf WITHSCORES LIMIT 0 10"
  "ZRANGEBYSCORE lb $BAND +inf WITHSCORES LIMIT 100 10"
  "ZCOUNT lb $BAND +inf"
)

for round in $(seq 1 "$ROUNDS"); do
  echo "round $round/$ROUNDS" >&2
  for cmd in "${COMMANDS[@]}"; do
    for pipeline in 1 16; do
      for side in "${SIDES[@]}"; do
        port=${PORT_OF[$side]}
        if [ "$side" = kvik ]; then redis-cli -p "$port" CONFIG SET rtc-zset-reads yes >/dev/null; fi
        if [ "$side" = kvik-off ]; then redis-cli -p "$port" CONFIG SET rtc-zset-reads no >/dev/null; fi
        # shellcheck disable=SC2086 # the command line is split into redis-benchmark's words
        run_rb "$port" "$side" -c 50 -P "$pipeline" -n "$REQUESTS" -r "$N" $cmd
        sed -i "\$s/^\($side\),\([^,]*\),/\1,\2 -P $pipeline,/" "$RESULTS"
      done
    done
  done
done
echo "N=$N members, $ROUNDS rounds, -c 50, $REQUESTS requests per run"
summarize "${SIDES[@]}"
