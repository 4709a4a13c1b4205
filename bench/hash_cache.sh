#!/usr/bin/env bash
# Small hashes in the hot cache, each test measured against its own switch in one run: a
# kvik-server loaded with N hashes of FIELDS fields, then rounds that alternate the switch on
# and off (A B A B), every hash read once (HGETALL, so cached) before each measurement:
#
#   HSET / HINCRBY  cache-hash-writes yes|no   writes read the fields from the cached copy and
#                                              update it | read RocksDB and drop it (the old path)
#   HGETALL / HMGET cache-enabled yes|no       answered from the cached hash on the I/O thread |
#                                              read from RocksDB in the pool (the old path)
#
# with -P 1 and -P 16, requests per second, the server's CPU per request (utime + stime from
# /proc) and the share answered on the I/O thread (INFO rtc_commands / all commands).
#
#   flock /tmp/kvik-bench.lock bench/hash_cache.sh
#   N=10000 FIELDS=8 ROUNDS=3 DURATION=5s PIPELINES="1 16" TESTS="hset hgetall" bench/hash_cache.sh
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."

N=${N:-10000}
FIELDS=${FIELDS:-8}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5s}
PIPELINES=${PIPELINES:-1 16}
TESTS=${TESTS:-hset hincrby hgetall hmget}

ensure_kvik_bench
port=$(free_port)
start_kvik "$port" kvik-hash
pid=${PIDS[-1]}
echo "load before: $(uptime | sed 's/.*load average: //')"
echo "loading $N hashes x $FIELDS fields"
for f in $(seq 1 "$FIELDS"); do
  "$KVIK_BENCH" -p "$port" -q -n "$N" -r "$N" --dist seq -c 50 -P 16 \
    HSET "h:__rand_int__" "f$f" "value-$f" >/dev/null
done

# test -> switch, on, off, command
declare -A SWITCH=([hset]=cache-hash-writes [hincrby]=cache-hash-writes
  [hgetall]=cache-enabled [hmget]=cache-enabled)
declare -A COMMAND=([hset]="HSET h:__rand_int__ f1 x f2 y" [hincrby]="HINCRBY h:__rand_int__ ctr 1"
  [hgetall]="HGETALL h:__rand_int__" [hmget]="HMGET h:__rand_int__ f1 f3 f5 nope")

warm() { "$KVIK_BENCH" -p "$port" -q -n "$N" -r "$N" --dist seq -c 50 -P 16 HGETALL "h:__rand_int__" >/dev/null; }

: >"$BENCH_TMP/rounds"
for test in $TESTS; do
  switch=${SWITCH[$test]}
  read -ra cmd <<<"${COMMAND[$test]}"
  for p in $PIPELINES; do
    for round in $(seq 1 "$ROUNDS"); do
      for value in yes no; do
        redis-cli -p "$port" config set "$switch" "$value" >/dev/null
        warm
        line="$test $p $value $(measure_kb "$pid" "$port" -r "$N" -c 50 -P "$p" \
          --duration "$DURATION" "${cmd[@]}")"
        echo "$line" >>"$BENCH_TMP/rounds"
        echo "  round $round: $line"
      done
    done
  done
  redis-cli -p "$port" config set "$switch" yes >/dev/null
done
python3 - "$BENCH_TMP/rounds" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
print("| test | -P | switch on rps (CPU us/req, I/O thread) | off rps (CPU us/req, I/O thread) | on/off |")
print("|---|---|---|---|---|")
for test, p in dict.fromkeys((r[0], r[1]) for r in rows):
    med = {v: [statistics.median(float(r[i]) for r in rows if r[:3] == [test, p, v]) for i in (3, 4, 5)]
           for v in ("yes", "no")}
    (ry, uy, sy), (rn, un, sn) = med["yes"], med["no"]
    print(f"| {test.upper()} | {p} | {ry:,.0f} ({uy:.1f}, {sy:.2f}) | {rn:,.0f} ({un:.1f}, {sn:.2f}) | **{ry / rn:.2f}** |")
PY
echo "load after: $(uptime | sed 's/.*load average: //')"
