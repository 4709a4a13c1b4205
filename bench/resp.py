"""RESP over a plain socket for the benchmark scripts that time single commands (no client
library, so nothing between the command and the clock): `encode` a command, `read_reply` one
reply from a buffered socket file and return its first line."""


def encode(args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def read_reply(f):
    line = f.readline()
    kind = line[:1]
    if kind in (b"+", b"-", b":", b"_", b",", b"#"):
        return line
    if kind in (b"$", b"="):
        n = int(line[1:])
        if n >= 0:
            f.read(n + 2)
        return line
    if kind in (b"*", b"~", b">"):
        for _ in range(max(int(line[1:]), 0)):
            read_reply(f)
        return line
    if kind == b"%":
        for _ in range(2 * int(line[1:])):
            read_reply(f)
        return line
    raise ValueError(line)
