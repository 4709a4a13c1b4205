#!/usr/bin/env bash
# Reads of what a mass deletion left: a hash of N fields with all but KEEP of them deleted by
# HDEL, and a sorted set of N members with all but KEEP popped by ZPOPMIN; then HSCAN,
# HGETALL, ZRANGE and ZSCAN of the rest. A deleted record stays in RocksDB as a tombstone until
# a compaction drops it, and every scan over its range steps over it (blackwidow #19: HGETALL
# slow after most fields were deleted). Sides alternate per round on a fresh server each:
# `rocksdb-tombstone-cleanup no`, `yes` (default), and redis-server (appendonly yes).
#
# After the deletions, each side gets the same quiet period: one of each read, then a trickle
# of writes to another key (20 SETs over 5 s, as a live server takes), then the measurement:
# redis-benchmark -c 1 (one request at a time, so its p50 is a request's own time).
#
#   bench/tombstones.sh                        # ROUNDS=2 N=1000000 KEEP=10000 READS=300
#   KVIK_BIN=target/release/kvik-server ROUNDS=1 N=200000 bench/tombstones.sh
#
# Run it under the machine-wide benchmark lock: flock /tmp/kvik-bench.lock bench/tombstones.sh
source "$(dirname "$0")/lib.sh"
ensure_redis

ROUNDS=${ROUNDS:-2}
N=${N:-1000000}
KEEP=${KEEP:-10000}
READS=${READS:-300}
TIMEOUT=${TIMEOUT:-60}

# fill port: the hash h (N fields of 20 bytes) and the sorted set z (N members, score = index),
# 1000 per command through redis-cli --pipe; then deletes all but the last KEEP of each.
fill_and_delete() {
  local port=$1
  python3 - "$N" <<'EOF' | redis-cli -p "$port" --pipe >/dev/null
import sys
n = int(sys.argv[1])
out = sys.stdout.buffer
def cmd(*args):
    out.write(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
for start in range(0, n, 1000):
    fields = []
    for i in range(start, min(n, start + 1000)):
        fields += [b"f:%09d" % i, b"v" * 20]
    cmd(b"HSET", b"h", *fields)
    members = []
    for i in range(start, min(n, start + 1000)):
        members += [b"%d" % i, b"m:%09d" % i]
    cmd(b"ZADD", b"z", *members)
EOF
  python3 - "$N" "$KEEP" <<'EOF' | redis-cli -p "$port" --pipe >/dev/null
import sys
n, keep = int(sys.argv[1]), int(sys.argv[2])
out = sys.stdout.buffer
def cmd(*args):
    out.write(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
for start in range(0, n - keep, 1000):
    cmd(b"HDEL", b"h", *[b"f:%09d" % i for i in range(start, min(n - keep, start + 1000))])
    cmd(b"ZPOPMIN", b"z", b"%d" % min(1000, n - keep - start))
EOF
}

# quiet port: one of each read, then 20 SETs of another key over 5 s.
quiet() {
  local port=$1
  redis-cli -p "$port" hscan h 0 >/dev/null
  redis-cli -p "$port" zrange z 0 0 >/dev/null
  redis-cli -p "$port" zscan z 0 >/dev/null
  for i in $(seq 20); do
    redis-cli -p "$port" set trickle "$i" >/dev/null
    sleep 0.25
  done
}

# measure port command...: "rps p50" of READS requests, one at a time.
measure() {
  local port=$1; shift
  timeout "$TIMEOUT" redis-benchmark -p "$port" -q -n "$READS" -c 1 "$@" 2>&1 | tr '\r' '\n' |
    awk '/requests per second/ {for (i = 1; i <= NF; i++) {
      if ($i == "requests") rps = $(i - 1); if ($i ~ /^p50=/) { sub("p50=", "", $i); p50 = $i } }
      print rps " (" p50 " ms)"; found = 1; exit }
      END { if (!found) print "cut" }'
}

run_side() { # label
  local port=$BACKEND_PORT label=$1 t0 t1
  t0=$(date +%s.%N)
  fill_and_delete "$port"
  t1=$(date +%s.%N)
  quiet "$port"
  local hlen zcard
  hlen=$(redis-cli -p "$port" hlen h)
  zcard=$(redis-cli -p "$port" zcard z)
  printf '%-12s fill+delete %ss, left %s fields, %s members | HSCAN h 0: %s | HGETALL h: %s | ZRANGE z 0 0: %s | ZSCAN z 0: %s | ZRANGEBYSCORE LIMIT 0 10: %s\n' \
    "$label" "$(awk "BEGIN {printf \"%.1f\", $t1 - $t0}")" "$hlen" "$zcard" \
    "$(measure "$port" HSCAN h 0)" "$(measure "$port" HGETALL h)" \
    "$(measure "$port" ZRANGE z 0 0)" "$(measure "$port" ZSCAN z 0)" \
    "$(measure "$port" ZRANGEBYSCORE z -inf +inf LIMIT 0 10)"
}

echo "N=$N KEEP=$KEEP READS=$READS ROUNDS=$ROUNDS; $(nproc) cores; kvik $KVIK_BIN"
for round in $(seq 1 "$ROUNDS"); do
  for side in off on redis; do
    BACKEND_PORT=$(free_port)
    case $side in
      off) start_kvik "$BACKEND_PORT" "kvik-off-$round" --rocksdb-tombstone-cleanup no ;;
      on) start_kvik "$BACKEND_PORT" "kvik-on-$round" ;;
      redis) start_redis "$BACKEND_PORT" "redis-$round" --appendonly yes --appendfsync everysec ;;
    esac
    run_side "$side"
    kill "${PIDS[-1]}"; wait "${PIDS[-1]}" 2>/dev/null || true
  done
done
