#!/usr/bin/env bash
# APPEND to long strings, and GET of them, on kvik with its defaults (a string APPEND grows
# past string-edit-inline-max, 64 KiB, is kept in 4 KiB segments and each APPEND writes the
# segment it touches), the same kvik with string-edit-inline-max 0 (every APPEND rewrites the
# whole string, as before), and redis-server; rounds alternate the sides. Each size starts from
# a fresh SET of that many bytes, then redis-benchmark -c 10 runs APPEND of 10 bytes and GET of
# the whole string (fewer requests for the big sizes, at least 200).
#
#   bench/string_edits.sh                   # SIZES=20000,65536,262144,1048576,8388608 ROUNDS=3
#   SIZES=65536,1048576 ROUNDS=1 bench/string_edits.sh
#
# Run it under the machine-wide benchmark lock: flock /tmp/kvik-bench.lock bench/string_edits.sh
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."
ensure_redis

SIZES=${SIZES:-20000,65536,262144,1048576,8388608}
ROUNDS=${ROUNDS:-3}
N=${N:-4000}
RESULTS=$BENCH_TMP/results.csv

kport=$(free_port)
rport=$(free_port)
start_kvik "$kport" kvik
start_redis "$rport" redis --appendonly yes --appendfsync everysec
for _ in $(seq "$ROUNDS"); do
  for side in kvik kvik-whole redis-aof; do
    port=$kport
    case $side in
      kvik) redis-cli -p "$port" config set string-edit-inline-max 64kb >/dev/null ;;
      kvik-whole) redis-cli -p "$port" config set string-edit-inline-max 0 >/dev/null ;;
      redis-aof) port=$rport ;;
    esac
    for size in ${SIZES//,/ }; do
      n=$((400000000 / size))
      n=$((n > N ? N : n < 200 ? 200 : n))
      head -c "$size" /dev/zero | tr '\0' x | redis-cli -p "$port" -x set "s$size" >/dev/null
      run_rb "$port" "$side" -n "$n" -c 10 APPEND "s$size" 0123456789
      run_rb "$port" "$side" -n "$n" -c 10 GET "s$size"
    done
  done
done
echo "requests per second (p50/p99 ms); each size's string is SET fresh, then appended to:"
summarize kvik kvik-whole redis-aof
