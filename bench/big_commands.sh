#!/usr/bin/env bash
# One command with tens of thousands of arguments (MSET, DEL, HSET, HMGET, ZADD, WATCH ...),
# timed at two sizes on kvik and on redis-server side by side (bench/big_commands.py). A
# command's time should grow with its arguments; one that grows with their square (a scan for
# repeated keys) holds its I/O thread, and every client on it, that long: MSET of 50,000 keys
# took 10.6 s before section 33's fix.
#
#   bench/big_commands.sh                   # 10,000 and 50,000 arguments
#   SIZES=20000,100000 bench/big_commands.sh
#
# Run it under the machine-wide benchmark lock: flock /tmp/kvik-bench.lock bench/big_commands.sh
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."

ensure_redis
SIZES=${SIZES:-10000,50000}
for side in kvik redis-aof; do
  port=$(free_port)
  if [ "$side" = kvik ]; then
    start_kvik "$port" "$side"
  else
    start_redis "$port" "$side" --appendonly yes --appendfsync everysec
  fi
  echo "$side:"
  python3 bench/big_commands.py "$port" "$SIZES"
  echo
done
