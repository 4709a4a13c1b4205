#!/usr/bin/env bash
# Issue 6: the worker pools side by side in one run. Starts one kvik-server per pool mode
# (classic = mutex + condvar queue; adaptive = lock-free lists + spin/yield/park wait; block =
# the lock-free lists with `pool-wait block`, i.e. without the spin and yield levels;
# adaptive-spinN = adaptive with `pool-spin N`, to size the spin level on this CPU), runs
# redis-benchmark SET and GET at -c 50 and -c 300 against each in turn (A B C A B C ...), and
# prints medians of QPS and p99 with ratios against classic. The hot cache and run-to-completion
# are turned off when the binary has them, so every command goes through the pool. After each
# adaptive run it prints the pool counters from INFO, to show what the yield credit learned.
#
#   bench/pool.sh                              # 3 rounds, 100000 requests per test: ~3 min
#   ROUNDS=5 N=200000 MODES="classic adaptive adaptive-spin20" bench/pool.sh
#   QUICK=1 bench/pool.sh                      # 2 rounds of 50000 (what make bench runs)
#
# Run it under the machine-wide benchmark lock: flock /tmp/kvik-bench.lock bench/pool.sh
source "$(dirname "$0")/lib.sh"

if [ "${QUICK:-0}" = 1 ]; then : "${ROUNDS:=2}" "${N:=50000}"; fi # make bench: ~1 min
ROUNDS=${ROUNDS:-3}
N=${N:-100000}
CLIENTS=${CLIENTS:-"50 300"}
MODES=${MODES:-"classic adaptive block"}
RESULTS=$BENCH_TMP/results.csv
COUNTERS=$BENCH_TMP/counters.txt

# Every command must reach the pool: no cache, no run-to-completion (if this build has them).
EXTRA=()
if "$KVIK_BIN" --help 2>/dev/null | grep -q -- '--cache-enabled'; then EXTRA+=(--cache-enabled no); fi
if "$KVIK_BIN" --help 2>/dev/null | grep -q -- '--rtc-read'; then EXTRA+=(--rtc-read no); fi

declare -A PORT
for mode in $MODES; do
  PORT[$mode]=$(free_port)
  case $mode in
    classic) start_kvik "${PORT[$mode]}" "$mode" --pool-mode classic "${EXTRA[@]}" ;;
    adaptive) start_kvik "${PORT[$mode]}" "$mode" --pool-mode adaptive "${EXTRA[@]}" ;;
    block) start_kvik "${PORT[$mode]}" "$mode" --pool-mode adaptive --pool-wait block "${EXTRA[@]}" ;;
    adaptive-spin[0-9]*)
      start_kvik "${PORT[$mode]}" "$mode" --pool-mode adaptive --pool-spin "${mode#adaptive-spin}" "${EXTRA[@]}" ;;
    *) echo "unknown mode $mode (classic, adaptive, block, adaptive-spinN)" >&2; exit 1 ;;
  esac
done

pool_counters() { # port
  redis-cli -p "$1" info stats | tr -d '\r' | grep '^kvik_pool_' |
    grep -E 'batches|spin_hits|yield_entered|yield_hits|yield_slow_exits|yield_skipped|parks|credit' |
    sed 's/^kvik_pool_//' | paste -sd' '
}

: >"$RESULTS"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(uname -sr)"
echo "load before: $(uptime | sed 's/.*load average/load average/')"
echo "servers: kvik-server (4 workers, 2 I/O threads, defaults) ${EXTRA[*]}"
echo "command: redis-benchmark -t set,get -n $N -r 100000 -c {$CLIENTS} --csv; $ROUNDS rounds, modes alternating: $MODES"
for round in $(seq 1 "$ROUNDS"); do
  for c in $CLIENTS; do
    for mode in $MODES; do
      before=$(wc -l <"$RESULTS")
      run_rb "${PORT[$mode]}" "$mode" -t set,get -n "$N" -r 100000 -c "$c"
      # Tag the rows just added with the client count.
      sed -i "$((before + 1)),\$ s/^\([^,]*\),\(SET\|GET\),/\1,\2 -c $c,/" "$RESULTS"
      case $mode in
        adaptive*) echo "$mode round $round -c $c: $(pool_counters "${PORT[$mode]}")" >>"$COUNTERS" ;;
      esac
    done
  done
done
echo "load after: $(uptime | sed 's/.*load average/load average/')"
echo

python3 - "$RESULTS" $MODES <<'PY'
import csv, statistics, sys
path, modes = sys.argv[1], sys.argv[2:]
rows = {}
for mode, test, rps, avg, p50, p95, p99, mx in csv.reader(open(path)):
    rows.setdefault((mode, test), []).append((float(rps), float(p99)))
tests = sorted({t for (_, t) in rows}, key=lambda t: (t.split()[0], int(t.split()[-1])))
base = modes[0]
others = modes[1:]
print("| test | " + " | ".join(f"{m} QPS / p99 ms" for m in modes) + " | "
      + " | ".join(f"{m}/{base} QPS | {m}/{base} p99" for m in others) + " |")
print("|---" * (1 + len(modes) + 2 * len(others)) + "|")
for t in tests:
    med = {}
    for m in modes:
        v = rows.get((m, t), [])
        if v:
            med[m] = (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v))
    if len(med) != len(modes):
        continue
    cells = [f"{med[m][0]:,.0f} / {med[m][1]:.3f}" for m in modes]
    ratios = []
    for m in others:
        ratios.append(f"{med[m][0] / med[base][0]:.2f}")
        ratios.append(f"{med[m][1] / med[base][1]:.2f}" if med[base][1] else "-")
    print(f"| {t} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
PY
echo
echo "final pool counters of each server (INFO kvik_pool_*):"
for mode in $MODES; do
  echo "$mode: $(redis-cli -p "${PORT[$mode]}" info stats | tr -d '\r' | grep -E '^kvik_pool_(submitted|batches|spin_hits|yield_entered|yield_skipped|parks|yield_credit)' | sed 's/^kvik_pool_//' | paste -sd' ')"
done
if [ -s "$COUNTERS" ]; then
  echo
  echo "adaptive pool counters (cumulative, INFO kvik_pool_*) after each of its runs:"
  cat "$COUNTERS"
fi
