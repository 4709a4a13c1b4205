#!/usr/bin/env bash
# Issue 15's write rows: group commit and run-to-completion writes, side by side with
# redis-server with AOF, for appendfsync everysec and always.
#
# Sides (all started here, filled with the same keys, run alternately for ROUNDS rounds):
#   kvik         defaults (group-commit yes, rtc-write yes, cache-write-allocate yes)
#   kvik-before  group-commit no, rtc-write no, cache-write-allocate no (one WAL write per
#                command, every write on a worker, prior state read from RocksDB: the old path)
#   redis-aof    redis-server --appendonly yes with the same appendfsync
# Each run is redis-benchmark -c 50 -r 100000 (-P 1 and -P 16); next to requests per second it
# prints the server's CPU time per request (utime+stime from /proc/<pid>/stat over the run),
# which a busy machine disturbs far less than throughput.
#
#   bench/group_commit.sh                  # 3 rounds, N=200000 (x4 with -P 16), everysec+always
#   QUICK=1 bench/group_commit.sh          # 3 rounds, N=30000
#   FSYNCS=everysec TESTS=set,incr ROUNDS=5 bench/group_commit.sh   (TESTS_ALWAYS for always)
#
# Run it under the machine-wide benchmark lock: flock /tmp/kvik-bench.lock bench/group_commit.sh
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."

ensure_redis

if [ "$QUICK" = 1 ]; then N=${N:-30000}; else N=${N:-200000}; fi
ROUNDS=${ROUNDS:-3}
KEYSPACE=${KEYSPACE:-100000}
TESTS=${TESTS:-set,incr,mset,hset,sadd,get}
# appendfsync always is bounded by the disk's fsyncs: fewer tests there by default.
TESTS_ALWAYS=${TESTS_ALWAYS:-set,incr}
FSYNCS=${FSYNCS:-everysec always}
HZ=$(getconf CLK_TCK)
ROWS=$BENCH_TMP/rows.csv
: >"$ROWS"

# one port pid label fsync pipeline: one redis-benchmark run per test, appending
# "fsync,label,test,pipeline,rps,cpu_us_per_req" rows.
one() {
  local port=$1 pid=$2 label=$3 fsync=$4 pipeline=$5 n=$N test tests=$TESTS
  [ "$pipeline" = 16 ] && n=$((N * 4))
  [ "$fsync" = always ] && tests=$TESTS_ALWAYS
  for test in ${tests//,/ }; do
    local before after rps
    before=$(cpu_ticks "$pid")
    rps=$(redis-benchmark -p "$port" -t "$test" -n "$n" -r "$KEYSPACE" -c 50 -P "$pipeline" --csv \
      2>/dev/null | tail -n 1 | tr -d '"' | cut -d, -f2)
    after=$(cpu_ticks "$pid")
    echo "$fsync,$label,$test,$pipeline,$rps,$(python3 -c "print(($after-$before)*1e6/$HZ/$n)")" >>"$ROWS"
  done
}

echo "machine: $(nproc) cores, $(uname -srm); $(redis-server --version | cut -d' ' -f1-3); load: $(uptime | sed 's/.*load average: //')"
echo "command: redis-benchmark -t $TESTS -n N -r $KEYSPACE -c 50 -P {1,16} (N=$N, 4N with -P 16); $ROUNDS rounds, alternating kvik kvik-before redis-aof"
for fsync in $FSYNCS; do
  declare -A PORT PID
  for side in kvik kvik-before redis-aof; do PORT[$side]=$(free_port); done
  start_kvik "${PORT[kvik]}" "kvik-$fsync" --appendfsync "$fsync"
  PID[kvik]=${PIDS[-1]}
  start_kvik "${PORT[kvik-before]}" "kvik-before-$fsync" --appendfsync "$fsync" \
    --group-commit no --rtc-write no --cache-write-allocate no
  PID[kvik-before]=${PIDS[-1]}
  start_redis "${PORT[redis-aof]}" "redis-aof-$fsync" --appendonly yes --appendfsync "$fsync"
  PID[redis-aof]=${PIDS[-1]}
  for side in kvik kvik-before redis-aof; do
    redis-benchmark -p "${PORT[$side]}" -t set -n "$KEYSPACE" -r "$KEYSPACE" -c 50 -P 16 -q >/dev/null
  done
  for pipeline in 1 16; do
    for round in $(seq 1 "$ROUNDS"); do
      for side in kvik kvik-before redis-aof; do
        one "${PORT[$side]}" "${PID[$side]}" "$side" "$fsync" "$pipeline"
      done
    done
  done
  for side in kvik kvik-before redis-aof; do kill "${PID[$side]}" 2>/dev/null || true; done
  wait 2>/dev/null || true
done

python3 - "$ROWS" <<'PY'
import csv, statistics, sys
rows = list(csv.reader(open(sys.argv[1])))
med = {}
for fsync, label, test, p, rps, cpu in rows:
    med.setdefault((fsync, test, p, label), []).append((float(rps or 0), float(cpu)))
print("| appendfsync | test | -P | kvik rps | kvik-before rps | redis-aof rps | kvik/redis-aof | kvik/kvik-before | CPU us/req kvik | kvik-before | redis-aof |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
keys = sorted({(f, t, p) for f, _, t, p, _, _ in rows}, key=lambda k: (k[0] != "everysec", k[1], int(k[2])))
for f, t, p in keys:
    def m(label, i):
        v = med.get((f, t, p, label))
        return statistics.median(x[i] for x in v) if v else float("nan")
    k, b, r = m("kvik", 0), m("kvik-before", 0), m("redis-aof", 0)
    print(f"| {f} | {t.upper()} | {p} | {k:,.0f} | {b:,.0f} | {r:,.0f} | {k/r:.2f} | {k/b:.2f} | "
          f"{m('kvik', 1):.1f} | {m('kvik-before', 1):.1f} | {m('redis-aof', 1):.1f} |")
PY
