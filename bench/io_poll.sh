#!/usr/bin/env bash
# Spinning polls after a busy turn (`io-poll-spin-us`): what they gain at full load and what they
# cost at a sparse one. One kvik-server (100k keys of 3 B), the setting flipped with CONFIG SET
# between runs (on, off, on, off ...):
#   - full load: redis-benchmark -c 50 -P 1 GET and SET over the keys (requests per second and
#     the server's CPU per request, utime + stime from /proc);
#   - sparse load: kvik-bench --rate R GET for a few seconds: the server's CPU in % of a core.
#
#   bench/io_poll.sh                       # 3 rounds, N=300000 requests per full-load run
#   QUICK=1 bench/io_poll.sh               # 2 rounds, N=100000, 3 s sparse runs
#   ON=100 ROUNDS=5 bench/io_poll.sh
#
# Run it under the machine-wide benchmark lock: flock /tmp/kvik-bench.lock bench/io_poll.sh
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."

ensure_redis
ensure_kvik_bench

if [ "${QUICK:-0}" = 1 ]; then N=${N:-100000}; ROUNDS=${ROUNDS:-2}; SPARSE=${SPARSE:-3}; else
  N=${N:-300000}; ROUNDS=${ROUNDS:-3}; SPARSE=${SPARSE:-10}; fi
ON=${ON:-50}
RATES=${RATES:-1000 10000}
port=$(free_port)
start_kvik "$port" kvik
pid=${PIDS[-1]}
redis-benchmark -p "$port" -q -c 50 -n 300000 -r 100000 -P 16 SET key:__rand_int__ xxx >/dev/null
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }

echo "machine: $(nproc) cores, $(uname -srm); load: $(uptime | sed 's/.*load average: //')"
echo "full load: redis-benchmark -c 50 -n $N -r 100000 <GET|SET>; sparse: kvik-bench --rate <$RATES> -t get -c 50 --duration ${SPARSE}s"
: >"$BENCH_TMP/rounds"
for round in $(seq 1 "$ROUNDS"); do
  for value in "$ON" 0; do
    redis-cli -p "$port" config set io-poll-spin-us "$value" >/dev/null
    for t in GET SET; do
      cmd=(GET key:__rand_int__)
      [ $t = SET ] && cmd=(SET key:__rand_int__ xxx)
      read -r rps us _ <<<"$(measure_client "$pid" "$port" redis-benchmark -p "$port" -q -c 50 -n "$N" -r 100000 "${cmd[@]}")"
      echo "$value $t $rps $us" >>"$BENCH_TMP/rounds"
      echo "  round $round io-poll-spin-us=$value $t: $rps req/s, $us us CPU/req"
    done
    for rate in $RATES; do
      c0=$(ticks)
      "$KVIK_BENCH" -p "$port" -q --rate "$rate" --duration "${SPARSE}s" -t get -r 100000 -c 50 >/dev/null
      c1=$(ticks)
      pct=$(python3 -c "print(f'{($c1 - $c0) / $(getconf CLK_TCK) / $SPARSE * 100:.1f}')")
      echo "$value rate$rate $pct 0" >>"$BENCH_TMP/rounds"
      echo "  round $round io-poll-spin-us=$value $rate GET/s: $pct% of a core"
    done
  done
done
python3 - "$BENCH_TMP/rounds" "$ON" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
on = sys.argv[2]
tests = list(dict.fromkeys(r[1] for r in rows))
print(f"| test | io-poll-spin-us {on} | 0 | {on}/0 |")
print("|---|---|---|---|")
for t in tests:
    med = lambda v, i: statistics.median(float(r[i]) for r in rows if r[0] == v and r[1] == t)
    if t.startswith("rate"):
        print(f"| GET at {int(t[4:]):,}/s: server CPU, % of a core | {med(on, 2):.1f} | {med('0', 2):.1f} | |")
    else:
        print(f"| {t} -P 1: req/s (CPU us/req) | {med(on, 2):,.0f} ({med(on, 3):.1f}) "
              f"| {med('0', 2):,.0f} ({med('0', 3):.1f}) | {med(on, 2) / med('0', 2):.2f} |")
PY
echo "load after: $(uptime | sed 's/.*load average: //')"
