"""One command at a time on big values: a list, hash, set, sorted set (and a one-score sorted
set) and stream of N members each, and an 8 MB string. `load` writes them (skipped if present);
`run` times each case: the median of up to 200 calls or 1 s of them, one connection, one
command in flight, printed as `case<TAB>ms`. Used by bench/big_values.sh:

    python3 big_values.py load PORT N
    python3 big_values.py run PORT N [filter]   # filter: parts of case names, comma-separated
"""
import statistics
import sys
import time

from resp import Conn


BIG_STRING = 8 << 20


def load(c, n):
    if c.call("EXISTS", "X") == b":1\r\n":
        return
    step = 1000
    for i in range(0, n, step):
        r = range(i, min(n, i + step))
        c.pipe([
            ["RPUSH", "L"] + ["v%09d" % j for j in r],
            ["HSET", "H"] + [x for j in r for x in ("f%09d" % j, "v%d" % j)],
            ["SADD", "S"] + ["m%09d" % j for j in r],
            ["ZADD", "Z"] + [x for j in r for x in (str(j), "m%09d" % j)],
            ["ZADD", "ZL"] + [x for j in r for x in ("0", "m%09d" % j)],
        ])
        c.pipe([["XADD", "X", "%d-1" % (j + 1), "f", "v"] for j in r])
        if i % 100_000 == 0:
            print("  loaded %d of %d" % (i, n), file=sys.stderr)


def cases(n):
    mid = n // 2
    m = lambda j: "m%09d" % j  # noqa: E731
    return [
        ("LINDEX mid", ["LINDEX", "L", mid]),
        ("LRANGE mid 10", ["LRANGE", "L", mid, mid + 9]),
        ("LSET mid", ["LSET", "L", mid, "w"]),
        ("HGET", ["HGET", "H", "f%09d" % mid]),
        ("HRANDFIELD 5", ["HRANDFIELD", "H", 5]),
        ("HRANDFIELD -5 WITHVALUES", ["HRANDFIELD", "H", -5, "WITHVALUES"]),
        ("HSCAN 0", ["HSCAN", "H", 0]),
        ("SISMEMBER", ["SISMEMBER", "S", m(mid)]),
        ("SRANDMEMBER", ["SRANDMEMBER", "S"]),
        ("SRANDMEMBER 5", ["SRANDMEMBER", "S", 5]),
        ("SRANDMEMBER 3000", ["SRANDMEMBER", "S", 3000]),
        ("SRANDMEMBER -10000", ["SRANDMEMBER", "S", -10000]),
        # Remove random members: one, then 500 per call (up to 100,000 a round, so later
        # rounds see a set up to a few tenths smaller).
        ("SPOP", ["SPOP", "S"]),
        ("SPOP 500", ["SPOP", "S", 500]),
        ("ZSCORE", ["ZSCORE", "Z", m(mid + 1)]),
        ("ZRANK mid", ["ZRANK", "Z", m(mid + 1)]),
        ("ZRANGE mid 10", ["ZRANGE", "Z", mid, mid + 9]),
        ("ZRANGEBYSCORE LIMIT mid 10", ["ZRANGEBYSCORE", "Z", "-inf", "+inf", "LIMIT", mid, 10]),
        ("ZREVRANGEBYSCORE LIMIT mid 10",
         ["ZREVRANGEBYSCORE", "Z", "+inf", "-inf", "LIMIT", mid, 10]),
        ("ZCOUNT mid..", ["ZCOUNT", "Z", mid, "+inf"]),
        ("ZLEXCOUNT mid..", ["ZLEXCOUNT", "ZL", "[" + m(mid), "+"]),
        ("ZRANGEBYLEX LIMIT mid 10", ["ZRANGEBYLEX", "ZL", "-", "+", "LIMIT", mid, 10]),
        # 3/8 of the way in, away from the members the other cases name.
        ("ZREMRANGEBYRANK 3/8", ["ZREMRANGEBYRANK", "Z", n * 3 // 8, n * 3 // 8]),
        ("ZRANDMEMBER 5", ["ZRANDMEMBER", "Z", 5]),
        # Set algebra of two big inputs: Z and ZL hold the same members, S most of them.
        ("ZINTERCARD Z ZL LIMIT 10", ["ZINTERCARD", 2, "Z", "ZL", "LIMIT", 10]),
        ("ZINTERCARD Z S LIMIT 1000", ["ZINTERCARD", 2, "Z", "S", "LIMIT", 1000]),
        ("ZINTERCARD Z Z", ["ZINTERCARD", 2, "Z", "Z"]),
        ("ZDIFF Z Z", ["ZDIFF", 2, "Z", "Z"]),
        ("SDIFF S S", ["SDIFF", "S", "S"]),
        ("XRANGE mid COUNT 10", ["XRANGE", "X", mid, "+", "COUNT", 10]),
        ("STRLEN 8MB", ["STRLEN", "BIG"]),
        ("GETRANGE 8MB mid 10", ["GETRANGE", "BIG", BIG_STRING // 2, BIG_STRING // 2 + 9]),
        ("SETRANGE 8MB mid", ["SETRANGE", "BIG", BIG_STRING // 2, "abc"]),
        ("APPEND 8MB 10 B", ["APPEND", "BIG", "0123456789"]),
        ("SETBIT 8MB", ["SETBIT", "BIG", 9999, 1]),
    ]


def run(c, n, only):
    # A fresh 8 MB string each run: how it is stored is the edits' business.
    c.call("SET", "BIG", "x" * BIG_STRING)
    for name, args in cases(n):
        if only and not any(o in name for o in only.split(",")):
            continue
        took = []
        deadline = time.time() + 1.0
        while len(took) < 200 and (time.time() < deadline or len(took) < 3):
            t = time.perf_counter()
            c.call(*args)
            took.append((time.perf_counter() - t) * 1e3)
        print("%s\t%.4f" % (name, statistics.median(took)))


def main():
    what, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    c = Conn(port)
    if what == "load":
        load(c, n)
    else:
        run(c, n, sys.argv[4] if len(sys.argv) > 4 else "")


main()
