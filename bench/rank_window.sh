#!/usr/bin/env bash
# A sorted set edited at one place, two kvik builds and redis-server side by side, one command
# in flight; the sides take blocks of 10 steps in turn. WORKLOAD=window (the default): a
# sliding window, N members at scores 0..N, then STEPS steps that each append 1,000 members
# past the end (ZADD, growing scores), drop the 1,000 oldest (ZREMRANGEBYSCORE) and time ZRANK
# and ZCOUNT of five random members of the window. WORKLOAD=joins: a leaderboard, N players
# at scores 1..N, then STEPS steps that each add 1,000 new players at score 0 (ZADD) and time
# ZRANK of five of the players who just joined and of five members drawn from all. Prints the
# median and the worst call of each (ms) and the rank-index builds and bucket splits INFO
# counted on the kvik sides: an index that cannot follow the edits is dropped and built
# again by a walk of the whole set.
#
#   bench/rank_window.sh OLD_BINARY NEW_BINARY            # N=1000000 STEPS=50 WORKLOAD=window
#
# Run it under the machine-wide benchmark lock: flock /tmp/kvik-bench.lock bench/rank_window.sh ...
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."
N=${N:-1000000}
STEPS=${STEPS:-50}
WORKLOAD=${WORKLOAD:-window}
start_builds_and_redis "$@"
cat >"$BENCH_TMP/window.py" <<'PY'
import random, re, statistics, sys, time
sys.path.insert(0, "bench")  # run from the checkout
from resp import Conn

what, workload, n, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
sides = dict(zip(("old", "new", "redis"), map(int, sys.argv[5:8])))
conns = {side: Conn(port) for side, port in sides.items()}
window = workload == "window"

def call(side, *args):
    return conns[side].call(*args)

def add(side, lo, hi, name="m%012d", score=None):
    call(side, "ZADD", "w",
         *(x for i in range(lo, hi) for x in (str(i if score is None else score), name % i)))

def stat(side, field):
    m = re.search(field + r":(\d+)", conns[side].info("stats"))
    return int(m.group(1)) if m else 0

def timed(side, query, *args):
    t = time.perf_counter()
    call(side, *args)
    took.setdefault((query, side), []).append((time.perf_counter() - t) * 1e3)

if what == "load":
    for side in sides:
        print("loading %d members on %s" % (n, side), file=sys.stderr)
        for lo in range(0 if window else 1, n, 1000):
            add(side, lo, min(n, lo + 1000))
    sys.exit(0)
for side in sides:
    call(side, "ZRANK", "w", "m%012d" % (n // 2))  # builds the index where there is one
fields = ("zset_rank_index_builds", "zset_rank_index_splits")
start = {side: [stat(side, f) for f in fields] for side in sides}
took = {}
rng = random.Random(1)
# Each side takes blocks of 10 steps in turn (old, new, redis, old ...), so one side's
# queries do not run beside the other side's writes of the same step.
if window:
    queries = ("ZRANK", "ZCOUNT")
    plan = [[first + rng.randrange(n) for _ in range(5)]
            for first in ((step + 1) * 1000 for step in range(steps))]
else:
    queries = ("ZRANK of a new player", "ZRANK of any member")
    plan = [[("j%012d" % (step * 1000 + rng.randrange(1000)),
              "j%012d" % rng.randrange((step + 1) * 1000) if rng.random() < 0.5
              else "m%012d" % rng.randrange(1, n)) for _ in range(5)]
            for step in range(steps)]
for block in range(0, steps, 10):
    for side in sides:
        for step in range(block, min(steps, block + 10)):
            if window:
                end = n + (step + 1) * 1000
                add(side, end - 1000, end)
                call(side, "ZREMRANGEBYSCORE", "w", "-inf", "(%d" % (end - n))
                for i in plan[step]:
                    timed(side, "ZRANK", "ZRANK", "w", "m%012d" % i)
                    timed(side, "ZCOUNT", "ZCOUNT", "w", i, "+inf")
            else:
                add(side, step * 1000, (step + 1) * 1000, "j%012d", 0)
                for new, anyone in plan[step]:
                    timed(side, queries[0], "ZRANK", "w", new)
                    timed(side, queries[1], "ZRANK", "w", anyone)
if window:
    print("%d steps of 1,000 appends and 1,000 removals on a window of %d members" % (steps, n))
else:
    print("%d steps of 1,000 players joining at score 0, %d players before" % (steps, n - 1))
print("| query | old median / worst | new median / worst | redis-server median / worst |")
print("|---|---|---|---|")
for q in queries:
    cells = ["%.3f / %.1f" % (statistics.median(took[(q, s)]), max(took[(q, s)])) for s in sides]
    print("| %s | %s |" % (q, " | ".join(cells)))
for f, name in enumerate(("builds", "bucket splits")):
    print("rank-index %s during the steps: old %d, new %d"
          % (name, stat("old", fields[f]) - start["old"][f], stat("new", fields[f]) - start["new"][f]))
PY
python3 "$BENCH_TMP/window.py" load "$WORKLOAD" "$N" "$STEPS" "${PORTS[@]}"
# The load's last flushes and compactions settle before the first timing.
settle "${PORTS[0]}"
settle "${PORTS[1]}"
python3 "$BENCH_TMP/window.py" run "$WORKLOAD" "$N" "$STEPS" "${PORTS[@]}"
