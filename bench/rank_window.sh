#!/usr/bin/env bash
# A sorted set used as a sliding window, two kvik builds and redis-server side by side: N
# members at scores 0..N, then STEPS steps that each append 1,000 members past the end (ZADD,
# growing scores), drop the 1,000 oldest (ZREMRANGEBYSCORE) and time ZRANK and ZCOUNT of five
# random members of the window, one in flight; the sides take blocks of 10 steps in turn. Prints the median and the worst
# call of each (ms) and the rank-index builds INFO counted on the kvik sides: an index that
# cannot follow the appends is dropped and built again by a walk of the whole set.
#
#   bench/rank_window.sh OLD_BINARY NEW_BINARY            # N=1000000 STEPS=50
#
# Run it under the machine-wide benchmark lock: flock /tmp/kvik-bench.lock bench/rank_window.sh ...
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."
N=${N:-1000000}
STEPS=${STEPS:-50}
start_builds_and_redis "$@"
cat >"$BENCH_TMP/window.py" <<'PY'
import random, re, statistics, sys, time
sys.path.insert(0, "bench")  # run from the checkout
from resp import Conn

what, n, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
sides = dict(zip(("old", "new", "redis"), map(int, sys.argv[4:7])))
conns = {side: Conn(port) for side, port in sides.items()}

def call(side, *args):
    return conns[side].call(*args)

def add(side, lo, hi):
    call(side, "ZADD", "w", *(x for i in range(lo, hi) for x in (str(i), "m%012d" % i)))

def builds(side):
    m = re.search(r"zset_rank_index_builds:(\d+)", conns[side].info("stats"))
    return int(m.group(1)) if m else 0

if what == "load":
    for side in sides:
        print("loading %d members on %s" % (n, side), file=sys.stderr)
        for lo in range(0, n, 1000):
            add(side, lo, min(n, lo + 1000))
    sys.exit(0)
for side in sides:
    call(side, "ZRANK", "w", "m%012d" % (n // 2))  # builds the index where there is one
start = {side: builds(side) for side in sides}
took = {}
rng = random.Random(1)
# Each side takes blocks of 10 steps in turn (old, new, redis, old ...), so one side's
# queries do not run beside the other side's writes of the same step.
plan = [[first + rng.randrange(n) for _ in range(5)]
        for first in ((step + 1) * 1000 for step in range(steps))]
for block in range(0, steps, 10):
    for side in sides:
        for step in range(block, min(steps, block + 10)):
            end = n + (step + 1) * 1000
            add(side, end - 1000, end)
            call(side, "ZREMRANGEBYSCORE", "w", "-inf", "(%d" % (end - n))
            for i in plan[step]:
                t = time.perf_counter()
                call(side, "ZRANK", "w", "m%012d" % i)
                took.setdefault(("ZRANK", side), []).append((time.perf_counter() - t) * 1e3)
                t = time.perf_counter()
                call(side, "ZCOUNT", "w", i, "+inf")
                took.setdefault(("ZCOUNT", side), []).append((time.perf_counter() - t) * 1e3)
print("%d steps of 1,000 appends and 1,000 removals on a window of %d members" % (steps, n))
print("| query | old median / worst | new median / worst | redis-server median / worst |")
print("|---|---|---|---|")
for q in ("ZRANK", "ZCOUNT"):
    cells = ["%.3f / %.1f" % (statistics.median(took[(q, s)]), max(took[(q, s)])) for s in sides]
    print("| %s | %s |" % (q, " | ".join(cells)))
print("rank-index builds during the steps: old %d, new %d"
      % (builds("old") - start["old"], builds("new") - start["new"]))
PY
python3 "$BENCH_TMP/window.py" load "$N" "$STEPS" "${PORTS[@]}"
# The load's last flushes and compactions settle before the first timing.
settle "${PORTS[0]}"
settle "${PORTS[1]}"
python3 "$BENCH_TMP/window.py" run "$N" "$STEPS" "${PORTS[@]}"
