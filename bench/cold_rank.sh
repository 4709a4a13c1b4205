#!/usr/bin/env bash
# A leaderboard's first seconds after a restart, two kvik builds side by side: a sorted set of
# N members is loaded once (by the new build), then each round starts each build on a fresh
# copy of that data directory, nothing indexed yet, and 50 clients at once ask ZREVRANK of
# random members (redis-benchmark -c 50 -n REQUESTS, started as soon as the server answers
# PING). Prints per run the wall time of those requests, their p50/p99/max latency, and the
# rank-index builds INFO counted (each build walks the whole set).
#
#   bench/cold_rank.sh OLD_BINARY NEW_BINARY      # N=1000000 ROUNDS=3 REQUESTS=20000
#
# Run it under the machine-wide benchmark lock: flock /tmp/kvik-bench.lock bench/cold_rank.sh ...
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."
[ $# -eq 2 ] || {
  echo "usage: $0 OLD_BINARY NEW_BINARY" >&2
  exit 2
}
ensure_redis
N=${N:-1000000}
ROUNDS=${ROUNDS:-3}
REQUESTS=${REQUESTS:-20000}

port=$(free_port)
KVIK_BIN=$2 start_kvik "$port" seed
python3 - "$N" "$port" <<'PY'
import random, sys
sys.path.insert(0, "bench")
from resp import Conn
n, c = int(sys.argv[1]), Conn(int(sys.argv[2]))
rng = random.Random(1)
print("loading %d members" % n, file=sys.stderr)
for lo in range(0, n, 1000):
    c.call("ZADD", "lb", *(x for i in range(lo, min(n, lo + 1000))
                           for x in (str(rng.randrange(n)), "m%012d" % i)))
PY
settle "$port" 120
redis-cli -p "$port" SHUTDOWN >/dev/null 2>&1 || true
wait "${PIDS[-1]}" 2>/dev/null || true

echo "N=$N members, $REQUESTS ZREVRANK from 50 clients right after a restart"
echo "| round | build | wall s | p50 ms | p99 ms | max ms | index builds |"
echo "|---|---|---|---|---|---|---|"
for round in $(seq 1 "$ROUNDS"); do
  for side in old new; do
    bin=$1
    [ "$side" = new ] && bin=$2
    rm -rf "$BENCH_TMP/run"
    cp -r "$BENCH_TMP/seed" "$BENCH_TMP/run"
    port=$(free_port)
    KVIK_BIN=$bin start_kvik "$port" run
    t0=$(date +%s.%N)
    line=$(redis-benchmark -p "$port" --csv -c 50 -n "$REQUESTS" -r "$N" \
      ZREVRANK lb m__rand_int__ 2>/dev/null | tail -n 1 | tr -d '"')
    t1=$(date +%s.%N)
    builds=$(redis-cli -p "$port" INFO stats | tr -d '\r' | sed -n 's/^zset_rank_index_builds://p')
    IFS=, read -r _ _ _ _ p50 _ p99 max <<<"$line"
    printf '| %s | %s | %.2f | %s | %s | %s | %s |\n' "$round" "$side" \
      "$(awk "BEGIN {print $t1 - $t0}")" "$p50" "$p99" "$max" "$builds"
    redis-cli -p "$port" SHUTDOWN >/dev/null 2>&1 || true
    wait "${PIDS[-1]}" 2>/dev/null || true
  done
done
