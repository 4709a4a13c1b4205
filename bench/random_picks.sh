#!/usr/bin/env bash
# Random picks of many members from one big set, two kvik builds and redis-server side by side:
# SRANDMEMBER with counts of 1,000 to 10,000 (distinct and with repeats) and SPOP 500, on a
# set of N members each server holds alike. Each cell is the median over ROUNDS rounds
# (alternating old, new, redis) of the median of 5 calls, one in flight (ms). For changes of
# how picks are drawn that no switch covers; bench/big_values.sh has the one-member picks.
#
#   bench/random_picks.sh OLD_BINARY NEW_BINARY            # N=1000000 ROUNDS=3
#
# Run it under the machine-wide benchmark lock: flock /tmp/kvik-bench.lock bench/random_picks.sh ...
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."
N=${N:-1000000}
ROUNDS=${ROUNDS:-3}
start_builds_and_redis "$@"
python3 - "$N" "$ROUNDS" "${PORTS[@]}" <<'PY'
import statistics, sys, time
sys.path.insert(0, "bench")
from resp import Conn

n, rounds = int(sys.argv[1]), int(sys.argv[2])
sides = dict(zip(("old", "new", "redis"), map(int, sys.argv[3:6])))
conns = {side: Conn(port) for side, port in sides.items()}

def call(side, *args):
    return conns[side].call(*args)

for side in sides:
    print("loading %d members on %s" % (n, side), file=sys.stderr)
    for i in range(0, n, 1000):
        call(side, "SADD", "S", *("m%09d" % j for j in range(i, min(n, i + 1000))))
    call(side, "SRANDMEMBER", "S", 5)  # a kvik with rank indexes builds the set's here
cases = [("SRANDMEMBER", "S", 1000), ("SRANDMEMBER", "S", 3000), ("SRANDMEMBER", "S", -3000),
         ("SRANDMEMBER", "S", -10000), ("SPOP", "S", 500)]
took = {}
for _ in range(rounds):
    for side in sides:
        for case in cases:
            calls = []
            for _ in range(5):
                t = time.perf_counter()
                call(side, *case)
                calls.append((time.perf_counter() - t) * 1e3)
            took.setdefault((case, side), []).append(statistics.median(calls))
print("| command | old | new | redis-server | old/new | redis/new |")
print("|---|---|---|---|---|---|")
for case in cases:
    old, new, redis = (statistics.median(took[(case, s)]) for s in sides)
    print("| %s | %.1f | %.1f | %.1f | %.1f | %.2f |"
          % (" ".join(map(str, case)), old, new, redis, old / new, redis / new))
PY
