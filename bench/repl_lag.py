#!/usr/bin/env python3
"""Replica lag sampler for bench/replication.sh (works with kvik-server and redis-server).

Every INTERVAL ms it writes a sentinel key on the primary and, once the primary acknowledged
it, polls each replica until the replica serves that value; a sample is the time from the
primary's reply to the value being visible on every replica. Runs until STOP_FILE exists (at
most 15 minutes), then writes "count p50 p99 max" (ms) to OUT_FILE. OUT_FILE.ready appears once
it is connected, so the load can start after it.

  repl_lag.py PRIMARY_PORT REPLICA_PORT[,REPLICA_PORT...] STOP_FILE OUT_FILE [INTERVAL_MS]
"""
import os
import socket
import sys
import time

GIVE_UP = 10.0  # seconds a sample may wait before it counts as this long
MAX_RUN = 900.0


class Resp:
    """A minimal RESP2 client: one command at a time, simple replies only."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.f = self.s.makefile("rb")

    def call(self, *args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a.encode() if isinstance(a, str) else a
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.s.sendall(b"".join(out))
        line = self.f.readline()
        kind, rest = line[:1], line[1:-2]
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self.f.read(n + 2)[:-2]
        if kind == b"-":
            raise RuntimeError(rest.decode())
        return rest


def main():
    primary_port, replica_ports, stop_file, out_file = sys.argv[1:5]
    interval = (int(sys.argv[5]) if len(sys.argv) > 5 else 20) / 1000.0
    primary = Resp(int(primary_port))
    replicas = [Resp(int(p)) for p in replica_ports.split(",")]
    open(out_file + ".ready", "w").close()
    samples = []
    started = time.monotonic()
    seq = 0
    while not os.path.exists(stop_file) and time.monotonic() - started < MAX_RUN:
        seq += 1
        value = str(seq).encode()
        primary.call("SET", "__kvik_bench_lag", value)
        t0 = time.perf_counter()
        for r in replicas:
            while r.call("GET", "__kvik_bench_lag") != value:
                if time.perf_counter() - t0 > GIVE_UP:
                    break
                time.sleep(0.0002)
        samples.append((time.perf_counter() - t0) * 1000.0)
        time.sleep(interval)
    samples.sort()
    if not samples:
        samples = [float("nan")]
    pick = lambda q: samples[min(len(samples) - 1, int(q * len(samples)))]
    with open(out_file, "w") as f:
        f.write(f"{len(samples)} {pick(0.5):.2f} {pick(0.99):.2f} {samples[-1]:.2f}\n")


if __name__ == "__main__":
    main()
