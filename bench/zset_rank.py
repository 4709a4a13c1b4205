"""Loads a sorted set of N members, score i for member player:<i as 12 digits>, into a server
(one pipelined connection, batches of 1,000 ZADDs): the same data in every server, in the
member names kvik-bench's __rand_int__ writes. Usage: zset_rank.py PORT KEY N"""
import socket
import sys

port, key, n = int(sys.argv[1]), sys.argv[2].encode(), int(sys.argv[3])
s = socket.create_connection(("127.0.0.1", port))


def zadd(score, member):
    parts = [b"ZADD", key, score, member]
    return b"*4\r\n" + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)


batch = 1000
for start in range(0, n, batch):
    end = min(n, start + batch)
    s.sendall(b"".join(zadd(b"%d" % i, b"player:%012d" % i) for i in range(start, end)))
    want, got = end - start, 0
    buf = b""
    while got < want:
        chunk = s.recv(65536)
        if not chunk:
            sys.exit("connection closed")
        buf += chunk
        got = buf.count(b"\r\n")
