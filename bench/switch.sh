#!/usr/bin/env bash
# One speed switch measured against itself: a kvik-server loaded with N keys, then rounds that
# alternate `CONFIG SET <switch> yes` and `no` (A B A B) running the same kvik-bench test, with
# requests per second, the server's CPU per request (utime + stime from /proc over the run) and
# the share answered on the I/O thread (INFO rtc_commands / (rtc_commands + pool_commands)).
#
#   bench/switch.sh rtc-storage-read -t get --dist zipf
#   bench/switch.sh cache-absent-keys -t get --dbnum 5 -r 5000 -P 16
#   N=1000000 SIZE=100 CACHE=1740000 MAXMEMORY=64mb ROUNDS=3 DURATION=5s bench/switch.sh ...
#
# The kvik-bench arguments default to -r N (the loaded keyspace) and -c 50; give -r to change it.
# Run it under the machine-wide benchmark lock: flock /tmp/kvik-bench.lock bench/switch.sh ...
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."

[ $# -ge 1 ] || { echo "usage: $0 SWITCH [kvik-bench args...]" >&2; exit 2; }
switch=$1; shift
N=${N:-1000000}
SIZE=${SIZE:-100}
CACHE=${CACHE:-$((N * (SIZE + 16) * 15 / 1000))}   # 1.5% of the raw data, as bench/scale.sh
MAXMEMORY=${MAXMEMORY:-64mb}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5s}

ensure_kvik_bench
port=$(free_port)
start_kvik "$port" kvik-switch --cache-maxmemory "$CACHE" --maxmemory "$MAXMEMORY"
pid=${PIDS[-1]}
echo "load before: $(uptime | sed 's/.*load average: //')"
echo "loading $N keys x $SIZE B (random values), hot cache $CACHE B, maxmemory $MAXMEMORY"
"$KVIK_BENCH" -p "$port" -q -t set -n "$N" -r "$N" --dist seq -d "$SIZE" --random-values -c 50 -P 16 >/dev/null
args=("$@")
case " ${args[*]} " in *" -r "*) ;; *) args+=(-r "$N") ;; esac
echo "test: kvik-bench ${args[*]} -c 50 --duration $DURATION"

: >"$BENCH_TMP/rounds"
for round in $(seq 1 "$ROUNDS"); do
  for value in yes no; do
    redis-cli -p "$port" config set "$switch" "$value" >/dev/null
    line="$value $(measure_kb "$pid" "$port" "${args[@]}" -c 50 --duration "$DURATION")"
    echo "$line" >>"$BENCH_TMP/rounds"
    read -r v r u s <<<"$line"
    echo "  round $round $switch=$v: $r req/s, $u us CPU/req, $s on the I/O thread"
  done
done
python3 - "$BENCH_TMP/rounds" "$switch" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = {v: [statistics.median(float(r[i]) for r in rows if r[0] == v) for i in (1, 2, 3)]
       for v in ("yes", "no")}
(ry, uy, sy), (rn, un, sn) = med["yes"], med["no"]
print(f"{sys.argv[2]}: yes {ry:,.0f} req/s ({uy:.1f} us CPU/req, {sy:.2f} on the I/O thread), "
      f"no {rn:,.0f} req/s ({un:.1f} us, {sn:.2f}); yes/no {ry / rn:.2f}x")
PY
echo "load after: $(uptime | sed 's/.*load average: //')"
