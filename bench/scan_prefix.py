"""One full SCAN MATCH (or HSCAN/SSCAN/ZSCAN MATCH of one key) iteration, then KEYS for SCAN,
over raw RESP (no client library needed); prints one CSV row:
label,command,pattern,count,items,calls,scan_seconds,keys_seconds

    python3 bench/scan_prefix.py PORT LABEL SCAN 'key:000000123*' 1000
    python3 bench/scan_prefix.py PORT LABEL HSCAN 'element:0000001234*' 1000 big
"""
import socket
import sys
import time

port, label, command, pattern, count = sys.argv[1:6]
key = sys.argv[6].encode() if len(sys.argv) > 6 else None
sock = socket.create_connection(("127.0.0.1", int(port)))
reader = sock.makefile("rb")


def send(*args):
    sock.sendall(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))


def line():
    return reader.readline()[:-2]


def bulk():
    n = int(line()[1:])
    return reader.read(n + 2)[:-2]


cursor, items, calls = b"0", 0, 0
start = time.time()
while True:
    head = [command.encode()] + ([key] if key else [])
    send(*head, cursor, b"MATCH", pattern.encode(), b"COUNT", count.encode())
    calls += 1
    line()
    cursor = bulk()
    n = int(line()[1:])
    for _ in range(n):
        bulk()
    items += n
    if cursor == b"0":
        break
scan_s = time.time() - start
keys_s = ""
if command.upper() == "SCAN":
    start = time.time()
    send(b"KEYS", pattern.encode())
    for _ in range(int(line()[1:])):
        bulk()
    keys_s = f"{time.time() - start:.3f}"
print(f"{label},{command},{pattern},{count},{items},{calls},{scan_s:.3f},{keys_s}")
