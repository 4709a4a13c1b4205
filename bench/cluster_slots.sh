#!/usr/bin/env bash
# Issue 7: the cached CLUSTER SLOTS reply, in the shape of Valkey PR #53's benchmark: 2 nodes,
#   best   node A owns 0-8191, node B 8192-16383   (2 ranges: a ~200-byte reply)
#   worst  node A owns the even slots, B the odd   (16384 ranges: a ~1.5 MB reply)
# `redis-benchmark -n N -c 1 CLUSTER SLOTS` against node A, alternating (A B A B, ROUNDS rounds):
#   cache    kvik, cluster-reply-cache yes (the reply rendered once per topology version)
#   nocache  kvik, cluster-reply-cache no  (rendered on every call)
#   redis    redis-server 7 in cluster mode with the same slot layout (ADDSLOTS + MEET)
# Both kvik sides are the same node, switched with CONFIG SET between runs. Topologies are
# pushed with plain redis-cli CLUSTER SETTOPOLOGY.
#
#   bench/cluster_slots.sh                      # BEST_N=100000 WORST_N=1000 ROUNDS=3
#   QUICK=1 bench/cluster_slots.sh              # BEST_N=20000 WORST_N=300
#
# Run it under the machine-wide benchmark lock: flock /tmp/kvik-bench.lock bench/cluster_slots.sh
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."

ensure_redis
if [ "${QUICK:-0}" = 1 ]; then
  BEST_N=${BEST_N:-20000}
  WORST_N=${WORST_N:-300}
else
  BEST_N=${BEST_N:-100000}
  WORST_N=${WORST_N:-1000}
fi
ROUNDS=${ROUNDS:-3}
RESULTS=$BENCH_TMP/results.csv
: >"$RESULTS"

# slot_args layout node: the node's slots as arguments ("0 8191" ranges or single slots).
slots_of() { # layout node(0|1) -> one slot per line
  python3 - "$1" "$2" <<'PY'
import sys
layout, node = sys.argv[1], int(sys.argv[2])
if layout == "best":
    r = range(0, 8192) if node == 0 else range(8192, 16384)
else:
    r = range(node, 16384, 2)
print("\n".join(map(str, r)))
PY
}

# A topology node line: "<id> 127.0.0.1 <port> <slot> ..." (contiguous runs joined as a-b).
node_line() { # id port layout node
  python3 - "$1" "$2" "$3" "$4" <<'PY'
import sys
i, port, layout, node = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
if layout == "best":
    slots = ["0-8191"] if node == 0 else ["8192-16383"]
else:
    slots = [str(s) for s in range(node, 16384, 2)]
print(" ".join([i, "127.0.0.1", port] + slots))
PY
}

setup_kvik() { # layout -> KVIK_PORT
  local layout=$1 p0 p1 id0 id1
  p0=$(free_port); p1=$(free_port)
  start_kvik "$p0" "kvik-$layout-0" --cluster-enabled yes
  start_kvik "$p1" "kvik-$layout-1" --cluster-enabled yes
  id0=$(redis-cli -p "$p0" cluster myid); id1=$(redis-cli -p "$p1" cluster myid)
  local l0 l1
  l0=$(node_line "$id0" "$p0" "$layout" 0); l1=$(node_line "$id1" "$p1" "$layout" 1)
  for p in "$p0" "$p1"; do
    [ "$(redis-cli -p "$p" cluster settopology 1 "$l0" "$l1")" = OK ] || {
      echo "SETTOPOLOGY failed on $p" >&2; exit 1; }
  done
  KVIK_PORT=$p0
}

# A free port whose cluster bus port (port + 10000) exists too.
bus_free_port() {
  local p
  while :; do p=$(free_port); [ "$p" -lt 55000 ] && { echo "$p"; return; }; done
}

setup_redis() { # layout -> REDIS_PORT
  local layout=$1 p0 p1
  p0=$(bus_free_port); p1=$(bus_free_port)
  start_redis "$p0" "redis-$layout-0" --cluster-enabled yes --cluster-config-file "$BENCH_TMP/nodes-$layout-0.conf"
  start_redis "$p1" "redis-$layout-1" --cluster-enabled yes --cluster-config-file "$BENCH_TMP/nodes-$layout-1.conf"
  slots_of "$layout" 0 | xargs redis-cli -p "$p0" cluster addslots >/dev/null
  slots_of "$layout" 1 | xargs redis-cli -p "$p1" cluster addslots >/dev/null
  redis-cli -p "$p0" cluster meet 127.0.0.1 "$p1" >/dev/null
  for _ in $(seq 1 300); do
    if redis-cli -p "$p0" cluster info | grep -q cluster_state:ok &&
       redis-cli -p "$p1" cluster info | grep -q cluster_state:ok &&
       [ "$(redis-cli -p "$p0" cluster slots | grep -c .)" -gt 0 ] &&
       redis-cli -p "$p0" cluster nodes | grep -c connected | grep -q 2; then
      REDIS_PORT=$p0; return 0
    fi
    sleep 0.1
  done
  echo "redis cluster ($layout) never reached cluster_state:ok" >&2; exit 1
}

echo "uptime before: $(uptime)"
for layout in best worst; do
  n=$BEST_N; [ "$layout" = worst ] && n=$WORST_N
  setup_kvik "$layout"
  setup_redis "$layout"
  # Same reply shape on both (ranges and node count), checked once.
  a=$(redis-cli -p "$KVIK_PORT" cluster slots | wc -l); b=$(redis-cli -p "$REDIS_PORT" cluster slots | wc -l)
  [ "$a" = "$b" ] || { echo "CLUSTER SLOTS sizes differ: kvik $a lines, redis $b" >&2; exit 1; }
  for r in $(seq 1 "$ROUNDS"); do
    redis-cli -p "$KVIK_PORT" config set cluster-reply-cache yes >/dev/null
    run_rb "$KVIK_PORT" "$layout/cache" -n "$n" -c 1 CLUSTER SLOTS
    redis-cli -p "$KVIK_PORT" config set cluster-reply-cache no >/dev/null
    run_rb "$KVIK_PORT" "$layout/nocache" -n "$n" -c 1 CLUSTER SLOTS
    run_rb "$REDIS_PORT" "$layout/redis" -n "$n" -c 1 CLUSTER SLOTS
    echo "round $r of $layout done" >&2
  done
done
echo "uptime after: $(uptime)"

python3 - "$RESULTS" "$BEST_N" "$WORST_N" "$ROUNDS" <<'PY'
import csv, statistics, sys
path, best_n, worst_n, rounds = sys.argv[1:]
rows = {}
for label, test, rps, avg, p50, p95, p99, mx in csv.reader(open(path)):
    rows.setdefault(label, []).append((float(rps), float(avg), float(p50), float(p99)))
print(f"CLUSTER SLOTS, 2 nodes, redis-benchmark -c 1 (best -n {best_n}, worst -n {worst_n}), "
      f"medians of {rounds} rounds")
print()
print("| layout | cache rps (avg ms) | nocache rps (avg ms) | redis 7 rps (avg ms) | cache/nocache | cache/redis | nocache/redis |")
print("|---|---|---|---|---|---|---|")
for layout in ("best", "worst"):
    m = {}
    for side in ("cache", "nocache", "redis"):
        v = rows.get(f"{layout}/{side}", [])
        if not v:
            break
        m[side] = (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v))
    if len(m) != 3:
        continue
    cell = lambda s: f"{m[s][0]:,.0f} ({m[s][1]:.3f})"
    print(f"| {layout} | {cell('cache')} | {cell('nocache')} | {cell('redis')} | "
          f"{m['cache'][0]/m['nocache'][0]:.2f} | {m['cache'][0]/m['redis'][0]:.2f} | "
          f"{m['nocache'][0]/m['redis'][0]:.2f} |")
PY
