"""One command with many arguments, timed at two sizes: a command whose time grows by much more
than the sizes' ratio is doing quadratic work (a scan for repeats, say) and holds an I/O thread
that long. Used by bench/big_commands.sh; run alone: python3 big_commands.py PORT 10000,50000."""
import socket
import sys
import time

from resp import encode, read_reply


def cases(n):
    """(name, arguments) of each command at size n; later ones read what earlier ones wrote."""
    tag = f"n{n}"
    keys = [f"{tag}:k{i}" for i in range(n)]
    fields = [f"f{i}" for i in range(n)]
    pairs = lambda xs: [a for x in xs for a in (x, "v")]
    scored = [a for i in range(n) for a in (i, f"m{i}")]
    h, z, s = f"{tag}:h", f"{tag}:z", f"{tag}:s"
    return [
        ("MSET", ["MSET"] + pairs(keys)),
        ("MGET", ["MGET"] + keys),
        ("MSET again", ["MSET"] + pairs(keys)),
        ("DEL", ["DEL"] + keys),
        ("HSET", ["HSET", h] + pairs(fields)),
        ("HMGET", ["HMGET", h] + fields),
        ("HDEL", ["HDEL", h] + fields),
        ("SADD", ["SADD", s] + fields),
        ("SREM", ["SREM", s] + fields),
        ("ZADD", ["ZADD", z] + scored),
        ("ZREM", ["ZREM", z] + [f"m{i}" for i in range(n)]),
        ("RPUSH", ["RPUSH", f"{tag}:l"] + fields),
        ("WATCH", ["WATCH"] + keys),
        ("UNWATCH", ["UNWATCH"]),
    ]


def main():
    port, sizes = int(sys.argv[1]), [int(x) for x in sys.argv[2].split(",")]
    sock = socket.create_connection(("127.0.0.1", port))
    f = sock.makefile("rb")
    times = {}
    for n in sizes:
        for name, args in cases(n):
            payload = encode(args)
            start = time.time()
            sock.sendall(payload)
            reply = read_reply(f)
            times[(name, n)] = time.time() - start
            if reply.startswith(b"-"):
                print(f"{name} at {n}: {reply.decode().strip()}", file=sys.stderr)
    names = [name for name, _ in cases(1)]
    print("| command | " + " | ".join(f"{n:,} args (ms)" for n in sizes)
          + f" | growth ({sizes[-1] // sizes[0]}x the arguments) |")
    print("|---" * (len(sizes) + 2) + "|")
    for name in names:
        ms = [times[(name, n)] * 1000 for n in sizes]
        growth = ms[-1] / ms[0] if ms[0] else float("nan")
        print(f"| {name} | " + " | ".join(f"{m:.0f}" for m in ms) + f" | {growth:.1f}x |")


if __name__ == "__main__":
    main()
