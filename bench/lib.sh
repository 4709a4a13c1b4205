# Shared helpers for the benchmark scripts: free ports, starting and stopping servers, waiting
# for them, and running redis-benchmark with CSV output. Source it; do not run it.

set -euo pipefail

: "${CARGO_TARGET_DIR:=$HOME/.cache/kvik-target}"
KVIK_BIN=${KVIK_BIN:-$CARGO_TARGET_DIR/release/kvik-server}
BENCH_TMP=$(mktemp -d /tmp/kvik-bench.XXXXXX)
PIDS=()

cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$BENCH_TMP"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

wait_ping() { # port
  for _ in $(seq 1 300); do
    if [ "$(redis-cli -p "$1" ping 2>/dev/null)" = "PONG" ]; then return 0; fi
    sleep 0.1
  done
  echo "server on port $1 did not answer PING" >&2
  return 1
}

start_kvik() { # port name [extra args...]
  local port=$1 name=$2; shift 2
  "$KVIK_BIN" --port "$port" --dir "$BENCH_TMP/$name" --loglevel warning "$@" \
    >"$BENCH_TMP/$name.log" 2>&1 &
  PIDS+=($!)
  wait_ping "$port"
}

start_redis() { # port name [extra args...]
  local port=$1 name=$2; shift 2
  mkdir -p "$BENCH_TMP/$name"
  redis-server --port "$port" --bind 127.0.0.1 --dir "$BENCH_TMP/$name" --save '' \
    --appendonly no "$@" >"$BENCH_TMP/$name.log" 2>&1 &
  PIDS+=($!)
  wait_ping "$port"
}

# start_backend kind name: starts a kvik-server or redis-server (kind = kvik | redis) on a free
# port and leaves the port in BACKEND_PORT. (Not a $(...) function: the server's pid must reach
# PIDS in this shell so the exit trap stops it.)
# start_builds_and_redis OLD_BINARY NEW_BINARY: a kvik server of each build and a redis-server
# (installed if missing), on fresh ports; their ports in PORTS (old, new, redis), for scripts
# that time two builds. Exits with a usage line unless given exactly the two binaries.
start_builds_and_redis() {
  [ $# -eq 2 ] || {
    echo "usage: $0 OLD_BINARY NEW_BINARY" >&2
    exit 2
  }
  ensure_redis
  PORTS=()
  local bin port side
  for side in old new; do
    bin=$1
    [ "$side" = new ] && bin=$2
    port=$(free_port)
    KVIK_BIN=$bin start_kvik "$port" "$side"
    PORTS+=("$port")
  done
  port=$(free_port)
  start_redis "$port" redis
  PORTS+=("$port")
}

start_backend() {
  BACKEND_PORT=$(free_port)
  case $1 in
    kvik) start_kvik "$BACKEND_PORT" "$2" ;;
    redis) start_redis "$BACKEND_PORT" "$2" ;;
    *) echo "unknown backend $1 (kvik or redis)" >&2; return 1 ;;
  esac
}

# run_rb port label [redis-benchmark args...]: appends "label,test,rps,avg,p50,p95,p99,max" rows
# to $RESULTS.
run_rb() {
  local port=$1 label=$2; shift 2
  redis-benchmark -p "$port" --csv "$@" 2>/dev/null | tail -n +2 | tr -d '"' |
    while IFS=, read -r test rps avg min p50 p95 p99 max; do
      echo "$label,$test,$rps,$avg,$p50,$p95,$p99,$max" >>"$RESULTS"
    done
}

# summarize A B: medians per (label, test) and the ratio A/B, as a Markdown table.
summarize() {
  python3 - "$RESULTS" "$@" <<'PY'
import csv, statistics, sys
path, labels = sys.argv[1], sys.argv[2:]
rows = {}
for label, test, rps, avg, p50, p95, p99, mx in csv.reader(open(path)):
    rows.setdefault((label, test), []).append((float(rps), float(p50), float(p99)))
tests = sorted({t for (_, t) in rows}, key=lambda t: (t.split()[0], t))
base = labels[-1]
print("| test | " + " | ".join(f"{l} rps (p50/p99 ms)" for l in labels)
      + " | " + " | ".join(f"{l}/{base}" for l in labels[:-1]) + " |")
print("|---" * (1 + 2 * len(labels) - 1) + "|")
for t in tests:
    med = {}
    for l in labels:
        v = rows.get((l, t), [])
        if v:
            med[l] = (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v),
                      statistics.median(x[2] for x in v))
    if len(med) != len(labels):
        continue
    cells = [f"{med[l][0]:,.0f} ({med[l][1]:.3f}/{med[l][2]:.3f})" for l in labels]
    ratios = [f"{med[l][0] / med[base][0]:.2f}" for l in labels[:-1]]
    print(f"| {t} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
PY
}

# measure_kb pid port [kvik-bench args...]: runs kvik-bench against the kvik-server `pid` on
# `port` and prints "rps cpu_us_per_request io_thread_share": the server's utime + stime from
# /proc over the run, and INFO rtc_commands / (rtc_commands + pool_commands). For scripts that
# measure a switch against itself (switch.sh, hash_cache.sh).
measure_kb() {
  local pid=$1 port=$2; shift 2
  measure_client "$pid" "$port" "$KVIK_BENCH" -p "$port" -q "$@"
}

# measure_client pid port client [args...]: measure_kb for any client whose last line of
# output says "...: <n> requests per second..." (kvik-bench -q, redis-benchmark -q).
measure_client() {
  local pid=$1 port=$2; shift 2
  local c0 c1 r0 r1 p0 p1 rps
  ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
  counter() { redis-cli -p "$port" info stats | tr -d '\r' | sed -n "s/^$1://p"; }
  c0=$(ticks); r0=$(counter rtc_commands); p0=$(counter pool_commands)
  rps=$("$@" | tr '\r' '\n' | grep ' requests' | tail -1 | sed 's/.*: \([0-9.]*\) requests.*/\1/')
  c1=$(ticks); r1=$(counter rtc_commands); p1=$(counter pool_commands)
  python3 -c "
ticks, hz = $c1 - $c0, $(getconf CLK_TCK)
rtc, pool = $r1 - $r0, $p1 - $p0
n = rtc + pool
print(f'{float($rps):.0f} {ticks / hz * 1e6 / max(n, 1):.1f} {rtc / max(n, 1):.2f}')"
}

# ---- kvik-bench helpers (issue 3) -------------------------------------------------------------
# Scripts that use kvik-bench: run_kb appends each run's JSON to $RESULTS_JSONL (and the same
# CSV rows as run_rb to $RESULTS, so `summarize` works on them too); summarize_kb prints medians
# with p99.9, ratios of the first side against every other side, marks tests a side does not
# support ("n/a (unsupported)": every reply was "ERR unknown command"), writes the medians as a
# summary JSON and draws it as an SVG plot with `kvik-bench --plot`.
#
# QUICK=1 (what `make bench` sets) asks a script for its quick size; see each script's header.

KVIK_BENCH=${KVIK_BENCH:-$CARGO_TARGET_DIR/release/kvik-bench}
QUICK=${QUICK:-0}
RESULTS_JSONL=${RESULTS_JSONL:-$BENCH_TMP/results.jsonl}

# ensure_redis: installs Debian's redis-server and redis-tools when they are missing.
ensure_redis() {
  if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null; then
    echo "installing redis-server and redis-tools (Debian packages)" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools >/dev/null
  fi
}

# ensure_kvik_bench: builds kvik-bench (and kvik-server) when the binaries are missing.
ensure_kvik_bench() {
  if [ ! -x "$KVIK_BENCH" ] || [ ! -x "$KVIK_BIN" ]; then
    (cd "$(dirname "${BASH_SOURCE[0]}")/.." &&
      cargo build --release -q -p kvik-bench -p kvik-server)
  fi
}

# cpu_ticks pid: the process's CPU time so far (utime + stime, in clock ticks).
# settle port [max_seconds]: waits until RocksDB has no flush or compaction pending or
# running (at most max_seconds, default 60), so a run after a load or a write test does not
# measure the compactions those left behind (the last one runs for seconds after nothing is
# pending, on both cores); prints how long it waited when that was more than a second.
settle() {
  local max=${2:-60} t0 waited
  t0=$(date +%s.%N)
  for _ in $(seq 1 $((max * 10))); do
    if ! redis-cli -p "$1" INFO rocksdb | tr -d '\r' |
      grep -E -q '(compaction|flush)_pending=1|^num_running_(flushes|compactions):[1-9]'; then
      waited=$(awk "BEGIN {printf \"%.1f\", $(date +%s.%N) - $t0}")
      awk "BEGIN {exit !($waited > 1)}" && echo "  (waited ${waited} s for RocksDB's flushes and compactions)" >&2
      return 0
    fi
    sleep 0.1
  done
  echo "  still compacting after ${max} s; measuring anyway" >&2
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# value_flag KIND: kvik-bench's flag for values of KIND: random (random bytes, incompressible),
# text (generated records that compress like application data) or repeated (x repeated, which
# compresses to almost nothing; no flag). Sets VALUE_FLAG; exits on another KIND.
value_flag() {
  case "$1" in
    random) VALUE_FLAG=--random-values ;;
    text) VALUE_FLAG=--text-values ;;
    repeated) VALUE_FLAG="" ;;
    *) echo "VALUES is random, text or repeated" >&2; exit 2 ;;
  esac
}

# run_kb port label [kvik-bench args...]: one kvik-bench run; test names get $KB_SUFFIX
# appended (e.g. " -P 16"). With KB_PID set (the server's pid), each test also gets the
# server's CPU time per request over the run (run one test per call for that to mean it).
run_kb() {
  local port=$1 label=$2; shift 2
  local t0=0 t1=0
  [ -n "${KB_PID:-}" ] && t0=$(cpu_ticks "$KB_PID")
  "$KVIK_BENCH" -p "$port" --json "$@" 2>>"$BENCH_TMP/kvik-bench.err" >"$BENCH_TMP/run.json"
  [ -n "${KB_PID:-}" ] && t1=$(cpu_ticks "$KB_PID")
  python3 -c '
import json, sys
label, jsonl, csvpath, suffix, ticks, hz = sys.argv[1:7]
doc = json.load(open(sys.argv[7]))
requests = sum(t["requests"] for t in doc["tests"])
for t in doc["tests"]:
    t["name"] += suffix
    if float(ticks) > 0 and requests:
        t["cpu_us_per_req"] = float(ticks) / float(hz) * 1e6 / requests
with open(jsonl, "a") as f:
    f.write(json.dumps({"label": label, "doc": doc}) + "\n")
with open(csvpath, "a") as f:
    for t in doc["tests"]:
        l = t["latency_ms"]
        row = [label, t["name"], t["rps"]] + [l[k] for k in ("avg", "p50", "p95", "p99", "max")]
        f.write(",".join(str(x) for x in row) + "\n")
' "$label" "$RESULTS_JSONL" "$RESULTS" "${KB_SUFFIX:-}" "$((t1 - t0))" "$(getconf CLK_TCK)" \
    "$BENCH_TMP/run.json"
}

# summarize_kb title plot.svg side1 side2 ...: medians of every run in $RESULTS_JSONL as a
# Markdown table, ratios side1/sideN of throughput, the summary JSON next to the plot, and the
# plot (skipped when the plot path is "-").
summarize_kb() {
  local title=$1 plot=$2; shift 2
  local summary="$BENCH_TMP/summary.json"
  python3 - "$RESULTS_JSONL" "$summary" "$title" "$@" <<'PY'
import json, statistics, sys
path, out, title, labels = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
runs = {}
order = []
for line in open(path):
    rec = json.loads(line)
    if rec["label"] not in labels:
        continue
    for t in rec["doc"]["tests"]:
        key = (rec["label"], t["name"])
        if t["name"] not in order:
            order.append(t["name"])
        runs.setdefault(key, []).append(t)
def unsupported(ts):
    return all(t["requests"] > 0 and t["errors"] == t["requests"] and
               any("unknown command" in s for s in t["error_samples"]) for t in ts)
rows, med = [], {}
for name in order:
    for l in labels:
        ts = runs.get((l, name))
        if not ts:
            continue
        if unsupported(ts):
            med[(l, name)] = None
            continue
        m = {"test": name, "side": l, "runs": len(ts),
             "rps": statistics.median(t["rps"] for t in ts),
             "errors": sum(t["errors"] for t in ts)}
        for k in ("p50", "p95", "p99", "p99_9", "max"):
            m[k] = statistics.median(t["latency_ms"][k] for t in ts)
        cpu = [t["cpu_us_per_req"] for t in ts if "cpu_us_per_req" in t]
        if cpu:
            m["cpu_us_per_req"] = statistics.median(cpu)
        med[(l, name)] = m
        rows.append(m)
first, others = labels[0], labels[1:]
# The server's CPU per request, when the script measured it (KB_PID).
cpu_cols = [l for l in labels if any("cpu_us_per_req" in m for m in rows if m["side"] == l)]
print("| test | " + " | ".join(f"{l} rps (p50/p99/p99.9 ms)" for l in labels) + " | "
      + " | ".join(f"{first}/{o}" for o in others)
      + "".join(f" | {l} CPU us/req" for l in cpu_cols) + " |")
print("|---" * (1 + len(labels) + len(others) + len(cpu_cols)) + "|")
for name in order:
    cells = []
    for l in labels:
        m = med.get((l, name), "missing")
        if m is None:
            cells.append("n/a (unsupported)")
        elif m == "missing":
            cells.append("-")
        else:
            err = f", {m['errors']} errors" if m["errors"] else ""
            cells.append(f"{m['rps']:,.0f} ({m['p50']:.3f}/{m['p99']:.3f}/{m['p99_9']:.3f}{err})")
    ratios = []
    for o in others:
        a, b = med.get((first, name)), med.get((o, name))
        ratios.append(f"{a['rps'] / b['rps']:.2f}" if isinstance(a, dict) and isinstance(b, dict) and b["rps"] else "n/a")
    cpus = []
    for l in cpu_cols:
        m = med.get((l, name))
        cpus.append(f"{m['cpu_us_per_req']:.2f}" if isinstance(m, dict) and "cpu_us_per_req" in m else "-")
    print(f"| {name} | " + " | ".join(cells) + " | " + " | ".join(ratios)
          + "".join(f" | {c}" for c in cpus) + " |")
json.dump({"title": title, "sides": labels, "rows": rows}, open(out, "w"), indent=1)
PY
  if [ "$plot" != "-" ]; then
    mkdir -p "$(dirname "$plot")"
    "$KVIK_BENCH" --plot "$summary" --plot-out "$plot" && echo "plot: $plot"
    cp "$summary" "${plot%.svg}.json"
  fi
}
