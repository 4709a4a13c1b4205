#!/usr/bin/env bash
# Lists' heads in the hot cache, at size: LISTS lists (tl:000000000000 ...) of ELEMS elements
# of about 50 bytes, read as timelines are (LRANGE key 0 9), on one kvik server with the
# budget MAXMEMORY (its hot cache half of it, far less than the lists), in three sides per
# round: kvik with lists' heads cached (`cache-list-elements 1024`, the default; warmed by
# WARM of the zipf reads first), the same server with `cache-list-elements 0` (set by CONFIG
# SET between runs), and redis-server (appendonly yes, appendfsync everysec) holding the same
# lists in memory. Loads: LRANGE 0 9 of a key drawn by zipf 0.99 and uniformly (-c 50), and
# the zipf reads (-c 40) beside a writer pushing to zipf-drawn lists (LPUSH, -c 10), for
# DURATION each. Prints one line per run: req/s and the server's CPU us per request.
#
#   bench/list_heads.sh                     # LISTS=1000000 ELEMS=20 ROUNDS=3 DURATION=10s
#   LISTS=100000 ROUNDS=1 DURATION=3s bench/list_heads.sh
#
# Run it under the machine-wide benchmark lock: flock /tmp/kvik-bench.lock bench/list_heads.sh
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."
ensure_redis
ensure_kvik_bench

LISTS=${LISTS:-1000000}
ELEMS=${ELEMS:-20}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
WARM=${WARM:-10s}
MAXMEMORY=${MAXMEMORY:-256mb}

kport=$(free_port)
rport=$(free_port)
start_kvik "$kport" kvik --maxmemory "$MAXMEMORY"
kpid=${PIDS[-1]}
start_redis "$rport" redis --appendonly yes --appendfsync everysec
rpid=${PIDS[-1]}
elems=()
for i in $(seq 1 "$ELEMS"); do
  elems+=("{\"id\":$i,\"user\":\"u$((i * 7919 % 1000))\",\"text\":\"status $i\"}")
done
for port in $kport $rport; do
  "$KVIK_BENCH" -p "$port" -q -n "$LISTS" -r "$LISTS" --dist seq -c 50 -P 16 \
    RPUSH tl:__rand_int__ "${elems[@]}" >/dev/null
done
settle "$kport" 120
echo "lists: kvik $(redis-cli -p "$kport" dbsize), redis $(redis-cli -p "$rport" dbsize); LLEN of one: $(redis-cli -p "$kport" llen tl:000000000007)"
echo "side,load,reads_per_s,writes_per_s,cpu_us_per_request"

# rps kvik-bench-args...: requests per second of one kvik-bench test.
rps() {
  "$KVIK_BENCH" -q --json "$@" | python3 -c 'import json, sys; print(json.load(sys.stdin)["tests"][0]["rps"])'
}

# run side port pid load: one measured run of `load` (zipf, uniform or mixed).
run() {
  local side=$1 port=$2 pid=$3 load=$4 t0 t1 reads writes=0 wpid
  local read_cmd=(LRANGE tl:__rand_int__ 0 9)
  t0=$(cpu_ticks "$pid")
  case $load in
    zipf | uniform)
      reads=$(rps -p "$port" -c 50 -r "$LISTS" --dist "$load" --duration "$DURATION" "${read_cmd[@]}")
      ;;
    mixed)
      rps -p "$port" -c 10 -r "$LISTS" --dist zipf --duration "$DURATION" \
        LPUSH tl:__rand_int__ '{"id":0,"text":"new"}' >"$BENCH_TMP/writes" &
      wpid=$!
      reads=$(rps -p "$port" -c 40 -r "$LISTS" --dist zipf --duration "$DURATION" "${read_cmd[@]}")
      wait "$wpid"
      writes=$(cat "$BENCH_TMP/writes")
      ;;
  esac
  t1=$(cpu_ticks "$pid")
  python3 -c "
r, w, ticks, secs = float('$reads'), float('$writes'), $((t1 - t0)), float('${DURATION%s}')
print('$side,$load,%d,%d,%.2f' % (r, w, ticks / $(getconf CLK_TCK) * 1e6 / ((r + w) * secs)))"
}

for round in $(seq 1 "$ROUNDS"); do
  for side in kvik kvik-off redis; do
    case $side in
      kvik)
        redis-cli -p "$kport" config set cache-list-elements 1024 >/dev/null
        "$KVIK_BENCH" -p "$kport" -q -c 50 -r "$LISTS" --dist zipf --duration "$WARM" \
          LRANGE tl:__rand_int__ 0 9 >/dev/null
        ;;
      kvik-off) redis-cli -p "$kport" config set cache-list-elements 0 >/dev/null ;;
    esac
    for load in zipf mixed uniform; do
      if [ "$side" = redis ]; then
        run "$side" "$rport" "$rpid" "$load"
      else
        run "$side" "$kport" "$kpid" "$load"
      fi
    done
  done
done
