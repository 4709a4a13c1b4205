#!/usr/bin/env bash
# Issue 6: the idle cost of the adaptive pool. Starts kvik-server with --pool-mode classic and
# with --pool-mode adaptive, gives each a short burst of load (so its workers have been busy and
# the adaptive ones have learned a credit), lets both sit idle, and measures the CPU time each
# process uses (utime + stime from /proc/<pid>/stat) over the same IDLE seconds (default 10).
# The adaptive pool's workers must end up parked, like the classic ones: the difference should be
# well under 1% of a core.
#
#   bench/pool_idle.sh            # ~20 s
#   IDLE=30 bench/pool_idle.sh
#
# Run it under the machine-wide benchmark lock: flock /tmp/kvik-bench.lock bench/pool_idle.sh
source "$(dirname "$0")/lib.sh"

IDLE=${IDLE:-10}
MODES="classic adaptive"
TICK=$(getconf CLK_TCK)

declare -A PORT PID
for mode in $MODES; do
  PORT[$mode]=$(free_port)
  start_kvik "${PORT[$mode]}" "$mode" --pool-mode "$mode"
  PID[$mode]=${PIDS[-1]}
done

cpu_ticks() { # pid: utime + stime in clock ticks (fields 14 and 15; the name field has no spaces)
  awk '{print $14 + $15}' "/proc/$1/stat"
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); load: $(uptime | sed 's/.*load average/load average/')"
for mode in $MODES; do
  redis-benchmark -p "${PORT[$mode]}" -t set,get -n 20000 -r 1000 -c 20 -q >/dev/null 2>&1
done
sleep 1
declare -A START
for mode in $MODES; do START[$mode]=$(cpu_ticks "${PID[$mode]}"); done
sleep "$IDLE"
echo "CPU used over $IDLE s idle (utime+stime, $TICK ticks/s):"
for mode in $MODES; do
  end=$(cpu_ticks "${PID[$mode]}")
  ticks=$((end - ${START[$mode]}))
  python3 -c "import sys; t,hz,s=map(float,sys.argv[1:4]); print(f'  {sys.argv[4]:9s} {t/hz:.3f} s CPU = {100*t/hz/s:.2f}% of one core')" \
    "$ticks" "$TICK" "$IDLE" "$mode"
  redis-cli -p "${PORT[$mode]}" info stats | tr -d '\r' | grep -E '^kvik_pool_(mode|parks|yield_credit)' | sed 's/^/    /'
done
