#!/usr/bin/env bash
# Two kvik-server builds side by side: rounds that alternate the builds (A B A B), a fresh
# server per run, then one benchmark run; prints requests per second and the server's CPU per
# request (utime + stime from /proc over the run, background threads included, divided by the
# commands INFO counted) per round. For changes that have no switch of their own (a data
# structure, a hash): build the old commit, copy its binary aside, build the new one.
#
# Small dataset, redis-benchmark (warmed with 20,000 requests; -c 50 -r 100000 unless given):
#   bench/builds.sh /tmp/kvik-old target/release/kvik-server -- -n 300000 SET key:__rand_int__ x
#   ROUNDS=5 bench/builds.sh OLD NEW -- -n 1000000 -P 16 SET key:__rand_int__ x
#   SCRIPT="return redis.call('incr', KEYS[1])" bench/builds.sh OLD NEW -- -n 150000 EVALSHA @sha 1 key:__rand_int__
# At size, kvik-bench (LOAD keys of SIZE bytes loaded first; -c 50 -r LOAD unless given):
#   LOAD=1000000 SERVER_ARGS="--cache-maxmemory 1740000 --maxmemory 64mb" \
#     bench/builds.sh OLD NEW -- -t set --dist uniform --duration 6s
# The loaded values are random bytes (incompressible); VALUES=text loads generated text that
# compresses like application data (kvik-bench --text-values), VALUES=repeated x repeated.
# FROM_DIR: each server starts on a fresh copy of this data directory (one loaded before, by
# bench/scale.sh or kvik-bench) instead of a load; give -r. WARM: a run of the same kvik-bench
# arguments for this long first (fills the hot cache), e.g.
#   FROM_DIR=/data/10m WARM=10s SERVER_ARGS="--cache-maxmemory 17400000 --maxmemory 116000000" \
#     bench/builds.sh OLD NEW -- -t get -r 10000000 --dist zipf --duration 8s
#
# With SCRIPT set, the script is loaded on each server and `@sha` in the arguments becomes its SHA.
# PREP: kvik-bench arguments of a run before the warm-up, on each server (data to read);
# several runs separated by ';', in order (a hash written, then a TTL set on its fields):
#   PREP="-n 300000 -r 100000 -P 16 HSET h:__rand_int__ a 1 b 2; -n 300000 -r 100000 -P 16 HEXPIRE h:__rand_int__ 100000 FIELDS 1 a" \
#     bench/builds.sh OLD NEW -- -n 1000000 -P 16 HGET h:__rand_int__ b
# OLD_ARGS / NEW_ARGS: server arguments of one build only: one binary against itself with a
# setting switched (SERVER_ARGS go to both):
#   PREP="-t hset -n 100000 -r 100000 --dist seq -P 16" OLD_ARGS="--cache-big-hashes no" \
#     bench/builds.sh BIN BIN -- -n 800000 -P 16 HGET myhash element:__rand_int__
# Run it under the machine-wide benchmark lock: flock /tmp/kvik-bench.lock bench/builds.sh ...
source "$(dirname "$0")/lib.sh"

[ $# -ge 4 ] && [ "$3" = "--" ] || {
  echo "usage: $0 OLD_BINARY NEW_BINARY -- [benchmark args...]" >&2
  exit 2
}
builds=("$1" "$2")
shift 3
ROUNDS=${ROUNDS:-3}
LOAD=${LOAD:-0}
SIZE=${SIZE:-100}
VALUES=${VALUES:-random}
value_flag "$VALUES"
read -r -a server_args <<<"${SERVER_ARGS:-}"
read -r -a build_args_0 <<<"${OLD_ARGS:-}"
read -r -a build_args_1 <<<"${NEW_ARGS:-}"
IFS=';' read -r -a prep_runs <<<"${PREP:-}"
[ ${#prep_runs[@]} -gt 0 ] && ensure_kvik_bench
args=("$@")
has() { case " ${args[*]} " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
has -c || args=(-c 50 "${args[@]}")
if [ "$LOAD" -gt 0 ] || [ -n "${FROM_DIR:-}" ]; then
  ensure_kvik_bench
  has -r || args=(-r "$LOAD" "${args[@]}")
  tool=kvik-bench
else
  has -r || args=(-r 100000 "${args[@]}")
  tool=redis-benchmark
fi
tck=$(getconf CLK_TCK)
echo "load before: $(uptime | sed 's/.*load average: //')"
[ -n "${FROM_DIR:-}" ] && echo "each server on a copy of $FROM_DIR; warm-up ${WARM:-none}; server args: ${server_args[*]}"
[ "$LOAD" -gt 0 ] && echo "each server first loaded with $LOAD keys x $SIZE B ($VALUES values); server args: ${server_args[*]}"
for prep in "${prep_runs[@]}"; do echo "each server first: kvik-bench $prep"; done
[ -n "${OLD_ARGS:-}${NEW_ARGS:-}" ] && echo "old: ${OLD_ARGS:-}; new: ${NEW_ARGS:-}"
echo "command: $tool ${args[*]}; $ROUNDS rounds alternating old new"
echo "| round | build | rps | server CPU us/request |"
echo "|---|---|---|---|"
commands() { redis-cli -p "$1" INFO stats | tr -d '\r' | sed -n 's/^total_commands_processed://p'; }
for round in $(seq 1 "$ROUNDS"); do
  for i in 0 1; do
    label=$([ "$i" = 0 ] && echo old || echo new)
    port=$(free_port)
    extra=()
    if [ "$i" = 0 ]; then extra=("${build_args_0[@]}"); else extra=("${build_args_1[@]}"); fi
    if [ -n "${FROM_DIR:-}" ]; then
      rm -rf "$BENCH_TMP/build-$round-$i"
      cp -r "$FROM_DIR" "$BENCH_TMP/build-$round-$i"
    fi
    KVIK_BIN=${builds[$i]} start_kvik "$port" "build-$round-$i" "${server_args[@]}" "${extra[@]}"
    pid=${PIDS[-1]}
    for prep in "${prep_runs[@]}"; do
      read -r -a prep_args <<<"$prep"
      "$KVIK_BENCH" -p "$port" -q "${prep_args[@]}" >/dev/null 2>&1
    done
    [ ${#prep_runs[@]} -gt 0 ] && settle "$port"
    run_args=("${args[@]}")
    if [ -n "${SCRIPT:-}" ]; then
      sha=$(redis-cli -p "$port" SCRIPT LOAD "$SCRIPT")
      run_args=("${run_args[@]/@sha/$sha}")
    fi
    if [ "$LOAD" -gt 0 ]; then
      "$KVIK_BENCH" -p "$port" -q -t set -n "$LOAD" -r "$LOAD" --dist seq -d "$SIZE" \
        $VALUE_FLAG -c 50 -P 16 >/dev/null
      settle "$port"
      run=("$KVIK_BENCH" -p "$port" -q "${run_args[@]}")
    elif [ -n "${FROM_DIR:-}" ]; then
      run=("$KVIK_BENCH" -p "$port" -q "${run_args[@]}")
    else
      warm=("${run_args[@]}")
      for j in "${!warm[@]}"; do
        if [ "${warm[$j]}" = "-n" ]; then warm[j + 1]=20000; fi
      done
      redis-benchmark -p "$port" -q "${warm[@]}" >/dev/null 2>&1
      run=(redis-benchmark -p "$port" -q "${run_args[@]}")
    fi
    if [ -n "${WARM:-}" ]; then
      warm=("${run[@]}")
      for j in "${!warm[@]}"; do
        if [ "${warm[$j]}" = "--duration" ]; then warm[j + 1]=$WARM; fi
      done
      "${warm[@]}" >/dev/null 2>&1
    fi
    c0=$(commands "$port")
    t0=$(cpu_ticks "$pid")
    out=$("${run[@]}" 2>/dev/null | tr '\r' '\n' | grep "requests per second" | tail -1)
    t1=$(cpu_ticks "$pid")
    c1=$(commands "$port")
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    [ -n "${FROM_DIR:-}" ] && rm -rf "$BENCH_TMP/build-$round-$i"
    rps=$(echo "$out" | sed 's/.*: \([0-9.]*\) requests.*/\1/')
    # INFO itself is one command of the count.
    python3 -c "print('| %d | %s | %.0f | %.2f |' % ($round, '$label', $rps, ($t1 - $t0) / $tck * 1e6 / max(1, $c1 - $c0 - 1)))"
  done
done
