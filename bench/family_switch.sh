#!/usr/bin/env bash
# The family commands (issue 17) measured against themselves with `rtc-write` on and off: one
# kvik-server loaded as bench/families.sh and bench/streams.sh load theirs, then for each
# command rounds that alternate `CONFIG SET rtc-write yes` and `no` (A B A B) running the same
# redis-benchmark, with requests per second, the server's CPU per request (utime + stime from
# /proc over the run: what a loaded machine disturbs least) and the share answered on the I/O
# thread. Prints medians and yes/no.
#
#   bench/family_switch.sh                 # 3 rounds, N=20000 requests per run
#   ROUNDS=5 N=50000 bench/family_switch.sh
#   ONLY=XADD bench/family_switch.sh       # the commands whose line starts with ONLY
#
# Run it under the machine-wide benchmark lock: flock /tmp/kvik-bench.lock bench/family_switch.sh
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."

ensure_redis

N=${N:-20000}
ROUNDS=${ROUNDS:-3}
BITS=${BITS:-1000000}
POINTS=${POINTS:-100000}

# The rows of families.sh and streams.sh, with the -r of each; XREADGROUP and XACK run on a
# group refilled before each run (fill_group), so both sides meet the same pending entries.
COMMANDS=(
  "1000000|SETBIT bm 777777 1"
  "1000000|SETBIT bm:__rand_int__ 100 1"
  "1000000|GETBIT bm 777777"
  "1000000|BITCOUNT bm"
  "1000000|BITCOUNT bm 0 1000"
  "1000000|PFADD hll el:__rand_int__"
  "1000000|PFCOUNT hll"
  "$POINTS|GEOADD geo 13.__rand_int__ 38.__rand_int__ m:__rand_int__"
  "$POINTS|GEOSEARCH geo FROMLONLAT 13.5 38.5 BYRADIUS 10 km COUNT 10 ASC"
  "1000000|XADD s:add * field value"
  "$N|XREADGROUP GROUP g c COUNT 1 STREAMS s:grp >"
  "$N|XACK s:grp g 1-__rand_int__"
)

port=$(free_port)
start_kvik "$port" kvik-family-switch
pid=${PIDS[-1]}
python3 -c "
import random, sys
random.seed(17)
for _ in range($BITS // 10):
    sys.stdout.write('SETBIT bm %d 1\r\n' % random.randrange($BITS))
" | redis-cli -p "$port" --pipe >/dev/null
redis-benchmark -p "$port" -q -c 50 -n 50000 -r 1000000 PFADD hll el:__rand_int__ >/dev/null
redis-benchmark -p "$port" -q -c 50 -n "$POINTS" -r "$POINTS" \
  GEOADD geo 13.__rand_int__ 38.__rand_int__ m:__rand_int__ >/dev/null

# fill_group: a fresh `s:grp` with N explicit-ID entries, all pending for consumer c once
# XREADGROUP ran (as streams.sh).
fill_group() {
  redis-cli -p "$port" del s:grp >/dev/null
  seq 1 "$N" | awk '{ printf "*5\r\n$4\r\nXADD\r\n$5\r\ns:grp\r\n$%d\r\n1-%d\r\n$1\r\nf\r\n$1\r\nv\r\n", length($1) + 2, $1 }' |
    redis-cli -p "$port" --pipe >/dev/null
  redis-cli -p "$port" xgroup create s:grp g 0 >/dev/null
  case "$1" in
    XACK*) redis-cli -p "$port" xreadgroup group g c streams s:grp '>' >/dev/null ;;
  esac
}

set -f # the command lines are split into their words, and `*` is an XADD ID, not a glob
echo "machine: $(nproc) cores, $(uname -srm); load before: $(uptime | sed 's/.*load average: //')"
echo "command: redis-benchmark -q -n $N -c 50 -r <range> <command>; $ROUNDS rounds of rtc-write yes, no"
: >"$BENCH_TMP/rounds"
for row in "${COMMANDS[@]}"; do
  range=${row%%|*} cmd=${row#*|}
  case "$cmd" in "${ONLY:-}"*) ;; *) continue ;; esac
  for round in $(seq 1 "$ROUNDS"); do
    for value in yes no; do
      redis-cli -p "$port" config set rtc-write "$value" >/dev/null
      case "$cmd" in XREADGROUP* | XACK*) fill_group "$cmd" ;; esac
      # shellcheck disable=SC2086 # split into its arguments on purpose (globbing is off)
      line=$(measure_client "$pid" "$port" redis-benchmark -p "$port" -q -n "$N" -c 50 -r "$range" $cmd)
      echo "$cmd|$value $line" >>"$BENCH_TMP/rounds"
    done
  done
done
python3 - "$BENCH_TMP/rounds" <<'PY'
import statistics, sys
rows = {}
for l in open(sys.argv[1]):
    cmd, rest = l.rstrip("\n").split("|")
    v, rps, cpu, share = rest.split()
    rows.setdefault(cmd, {}).setdefault(v, []).append((float(rps), float(cpu), float(share)))
print("| command | yes rps (us CPU/req, share on the I/O thread) | no rps (us CPU/req, share) | yes/no rps | no/yes CPU |")
print("|---|---|---|---|---|")
for cmd, by in rows.items():
    med = {v: [statistics.median(x[i] for x in by[v]) for i in range(3)] for v in ("yes", "no")}
    (ry, cy, sy), (rn, cn, sn) = med["yes"], med["no"]
    print(f"| {cmd} | {ry:,.0f} ({cy:.1f}, {sy:.2f}) | {rn:,.0f} ({cn:.1f}, {sn:.2f}) "
          f"| {ry / rn:.2f} | {cn / cy:.2f} |")
PY
echo "load after: $(uptime | sed 's/.*load average: //')"
