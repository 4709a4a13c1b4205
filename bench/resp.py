"""RESP over a plain socket for the benchmark scripts that time single commands (no client
library, so nothing between the command and the clock): `encode` a command, `read_reply` one
reply from a buffered socket file and return its first line, `Conn` a connection that does
both."""
import socket


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


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.f = self.s.makefile("rb")

    def call(self, *args):
        """Sends one command; its reply's first line. An error reply raises."""
        self.s.sendall(encode(args))
        reply = read_reply(self.f)
        if reply.startswith(b"-"):
            raise RuntimeError("%r: %r" % (args[:3], reply))
        return reply

    def pipe(self, cmds):
        """Sends commands in one write and reads their replies; an error reply raises."""
        self.s.sendall(b"".join(encode(c) for c in cmds))
        for _ in cmds:
            r = read_reply(self.f)
            if r.startswith(b"-"):
                raise RuntimeError(r)

    def info(self, section):
        """The text of INFO `section`."""
        self.s.sendall(encode(["INFO", section]))
        return self.f.read(int(self.f.readline()[1:]) + 2).decode()
