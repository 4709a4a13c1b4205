#!/usr/bin/env bash
# One speed switch measured against itself: a kvik-server loaded with N keys, then rounds that
# alternate `CONFIG SET <switch> yes` and `no` (A B A B) running the same kvik-bench test, with
# requests per second, the server's CPU per request (utime + stime from /proc over the run) and
# the share answered on the I/O thread (INFO rtc_commands / (rtc_commands + pool_commands)).
#
#   bench/switch.sh rtc-storage-read -t get --dist zipf
#   bench/switch.sh cache-absent-keys -t get --dbnum 5 -r 5000 -P 16
#   N=1000000 SIZE=100 CACHE=1740000 MAXMEMORY=64mb ROUNDS=3 DURATION=5s bench/switch.sh ...
#   ON=50 OFF=0 bench/switch.sh io-poll-spin-us -t get      # a setting whose values are not yes/no
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
ON=${ON:-yes}
OFF=${OFF:-no}

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
  for side in on off; do
    if [ $side = on ]; then value=$ON; else value=$OFF; fi
    redis-cli -p "$port" config set "$switch" "$value" >/dev/null
    line="$side $(measure_kb "$pid" "$port" "${args[@]}" -c 50 --duration "$DURATION")"
    echo "$line" >>"$BENCH_TMP/rounds"
    read -r v r u s <<<"$line"
    echo "  round $round $switch=$value: $r req/s, $u us CPU/req, $s on the I/O thread"
  done
done
python3 - "$BENCH_TMP/rounds" "$switch" "$ON" "$OFF" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
name, on, off = sys.argv[2:5]
med = {v: [statistics.median(float(r[i]) for r in rows if r[0] == v) for i in (1, 2, 3)]
       for v in ("on", "off")}
(ry, uy, sy), (rn, un, sn) = med["on"], med["off"]
print(f"{name}: {on} {ry:,.0f} req/s ({uy:.1f} us CPU/req, {sy:.2f} on the I/O thread), "
      f"{off} {rn:,.0f} req/s ({un:.1f} us, {sn:.2f}); {on}/{off} {ry / rn:.2f}x")
PY
echo "load after: $(uptime | sed 's/.*load average: //')"
