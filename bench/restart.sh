#!/usr/bin/env bash
# Issue 14: how fast kvik serves again after a restart with a large dataset on disk.
#
# Loads N keys of SIZE bytes of random (incompressible) values, then restarts the server on the
# same directory ROUNDS times each way and times, from exec, the first PONG and the first hit
# (a GET of a key from the middle of the keyspace, read from disk):
#   clean   SHUTDOWN, then start
#   crash   a few thousand writes, kill -9, then start (RocksDB replays its WAL)
# redis-server cannot be compared at this size on this machine (it would need the data in RAM);
# its own restart loads the whole RDB/AOF before the first PONG, which is the point of contrast.
#
#   bench/restart.sh                       # 10M x 1 KB (~10 GB on disk, ~15 minutes to load)
#   N=1000000 SIZE=1000 bench/restart.sh   # 1 GB
#   QUICK=1 bench/restart.sh               # 1M x 100 B
#   DIR=/path N=10000000 bench/restart.sh  # reuse a directory an earlier run loaded (no load)
#
# Run it under the machine-wide benchmark lock: flock /tmp/kvik-bench.lock bench/restart.sh
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."

ensure_kvik_bench

if [ "${QUICK:-0}" = 1 ]; then
  N=${N:-1000000}
  SIZE=${SIZE:-100}
else
  N=${N:-10000000}
  SIZE=${SIZE:-1000}
fi
ROUNDS=${ROUNDS:-3}
KVIK_ARGS=${KVIK_ARGS:-}

echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -srm)"
echo "load before: $(uptime | sed 's/.*load average: //')"
port=$(free_port)
dir=${DIR:-$BENCH_TMP/kvik-restart}
# shellcheck disable=SC2206
args=($KVIK_ARGS)
probe=$(printf 'key:%012d' $((N / 2)))

# restart_once: starts the server on $dir, leaves its pid in SERVER_PID and sets PONG_MS and
# HIT_MS (wall clock from exec).
restart_once() {
  local t0 t1 t2
  t0=$(date +%s%N)
  "$KVIK_BIN" --port "$port" --dir "$dir" --loglevel warning "${args[@]}" \
    >>"$BENCH_TMP/restart.log" 2>&1 &
  SERVER_PID=$!
  PIDS+=("$SERVER_PID")
  until [ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ]; do
    kill -0 "$SERVER_PID" 2>/dev/null || { tail -3 "$BENCH_TMP/restart.log" >&2; exit 1; }
    sleep 0.005
  done
  t1=$(date +%s%N)
  until [ "$(redis-cli -p "$port" get "$probe" 2>/dev/null | wc -c)" -gt 1 ]; do sleep 0.005; done
  t2=$(date +%s%N)
  PONG_MS=$(( (t1 - t0) / 1000000 ))
  HIT_MS=$(( (t2 - t0) / 1000000 ))
}

# The server holds the directory's lock until its process is gone (after it stopped answering,
# and after /proc stops showing its command line), so wait for the process itself.
stop_clean() {
  redis-cli -p "$port" shutdown >/dev/null 2>&1 || true
  wait "$SERVER_PID" 2>/dev/null || true
}

stop_crash() {
  "$KVIK_BENCH" -p "$port" -q -t set -n 20000 -r "$N" -d "$SIZE" --random-values -c 10 >/dev/null
  kill -9 "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
}

if [ -n "${DIR:-}" ]; then
  echo "== reusing $dir ($N keys x $SIZE B loaded by an earlier run)"
  restart_once
else
  "$KVIK_BIN" --port "$port" --dir "$dir" --loglevel warning "${args[@]}" >"$BENCH_TMP/first.log" 2>&1 &
  SERVER_PID=$!
  PIDS+=("$SERVER_PID")
  wait_ping "$port"
  echo "== loading $N keys x $SIZE B of random bytes (kvik-bench -t set -n $N -r $N --dist seq -d $SIZE --random-values -c 50 -P 16)"
  t0=$(date +%s.%N)
  "$KVIK_BENCH" -p "$port" -q -t set -n "$N" -r "$N" --dist seq -d "$SIZE" --random-values -c 50 -P 16 |
    tail -1
  t1=$(date +%s.%N)
  echo "  loaded in $(awk "BEGIN {printf \"%.0f\", $t1 - $t0}") s; DBSIZE $(redis-cli -p "$port" dbsize)"
fi

stop_clean
echo "  on disk: $(du -sm "$dir" | cut -f1) MiB ($(find "$dir" -name '*.sst' -printf '%s\n' | awk '{s += $1} END {printf "%d", s / 1048576}') MiB of SST files)"
for kind in clean crash; do
  if [ "$kind" = crash ]; then
    restart_once
    stop_crash
  fi
  for round in $(seq 1 "$ROUNDS"); do
    restart_once
    echo "  $kind restart $round: first PONG after $PONG_MS ms, first hit ($probe) after $HIT_MS ms"
    echo "$kind $PONG_MS $HIT_MS" >>"$BENCH_TMP/restarts"
    if [ "$kind" = clean ]; then stop_clean; else stop_crash; fi
  done
done
python3 - "$BENCH_TMP/restarts" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
for kind in ("clean", "crash"):
    r = [(int(p), int(h)) for k, p, h in rows if k == kind]
    print(f"  {kind}: median first PONG {statistics.median(p for p, _ in r):.0f} ms, "
          f"first hit {statistics.median(h for _, h in r):.0f} ms ({len(r)} restarts)")
PY
echo "load after: $(uptime | sed 's/.*load average: //')"
