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
