#!/usr/bin/env bash
# Issue 14: kvik at the size users bring. Data many times the hot cache, measured side by side:
#
#   kvik     the loaded server, keys drawn from the whole keyspace (mostly cache misses)
#   hits     the same server, keys drawn from its first HOT keys only (all cache hits): the
#            memory-speed ceiling the large cases are held against
#   redis    redis-server (no persistence) holding the same data, where it fits in RAM
#   NAME=no  the loaded server with one speed switch turned off for its round (CONFIG SET), for
#            each NAME in OFF_SWITCHES (default none; e.g. OFF_SWITCHES="cache-write-allocate")
#
# Each dataset (N keys of SIZE bytes, loaded in order with kvik-bench --dist seq) gets GET
# uniform, GET zipf 0.99, GET of absent keys (`key:<n>x`, which sort between the stored ones,
# so a read must rule them out: what `rocksdb-filters-for-hits` trades), SET uniform and a
# 90:10 GET/SET mix, rounds alternating the sides.
# Then: SET on the full keyspace against SET on a 100k-key server (compaction keeps up?),
# DBSIZE latency, and a restart (SIGTERM, start on the same dir): time to the first PONG and to
# the first hit. A sampler records kvik's RSS and commands per second every second; the series is
# drawn to docs/benchmarks/scale-<dataset>-rss.svg with the phases marked. MAXMEMORY (the
# whole budget) defaults to 10% of the raw data, at least 64 MiB, so the data outgrows memory.
#
#   bench/scale.sh                          # 10M x 100 B, then 2M x 1 KB (~25 minutes)
#   DATASETS="1000000x100" bench/scale.sh   # one dataset: COUNTxBYTES
#   QUICK=1 bench/scale.sh                  # 1M x 100 B only, short runs (~5 minutes)
#   VALUES=text bench/scale.sh              # values of generated text (default: random bytes)
#   CACHE_PCT=1.5 DURATION=8s ROUNDS=3 MAXMEMORY=512mb KVIK_ARGS="--workers 2" bench/scale.sh
#
# Run it under the machine-wide benchmark lock: flock /tmp/kvik-bench.lock bench/scale.sh
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."

ensure_redis
ensure_kvik_bench

if [ "$QUICK" = 1 ]; then
  DATASETS=${DATASETS:-1000000x100}
  DURATION=${DURATION:-5s}
  ROUNDS=${ROUNDS:-2}
else
  DATASETS=${DATASETS:-10000000x100 2000000x1000}
  DURATION=${DURATION:-8s}
  ROUNDS=${ROUNDS:-3}
fi
CACHE_PCT=${CACHE_PCT:-1.5}      # hot cache size as a percentage of the raw data (keys + values)
HOT=${HOT:-1000}                 # the all-hits side's keyspace
CLIENTS=${CLIENTS:-50}
REDIS_MAX_GB=${REDIS_MAX_GB:-8}  # skip the redis side when the raw data is larger than this
KVIK_ARGS=${KVIK_ARGS:-}
OFF_SWITCHES=${OFF_SWITCHES:-}
# What the values are: random bytes (incompressible), text (compresses like application data,
# kvik-bench --text-values) or repeated (x repeated; RANDOM_VALUES=0 in earlier sections' commands).
if [ "${RANDOM_VALUES:-1}" = 1 ]; then VALUES=${VALUES:-random}; else VALUES=${VALUES:-repeated}; fi
value_flag "$VALUES"
MAXMEMORY=${MAXMEMORY:-auto}     # kvik's whole budget; auto = 10% of the raw data, at least 64 MiB
PLOT_DIR=${PLOT_DIR:-docs/benchmarks}
RESULTS=$BENCH_TMP/results.csv
: >"$RESULTS"

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
info_field() { redis-cli -p "$1" info "$2" | tr -d '\r' | sed -n "s/^$3://p"; }

# sampler pid port out: one line a second, "seconds,rss_kib,commands_processed,phase", until
# the server exits; the current phase is read from $BENCH_TMP/phase.
sampler() {
  local pid=$1 port=$2 out=$3 t0
  t0=$(date +%s.%N)
  while kill -0 "$pid" 2>/dev/null; do
    local now cmds
    now=$(date +%s.%N)
    cmds=$(info_field "$port" stats total_commands_processed 2>/dev/null)
    echo "$(awk "BEGIN {printf \"%.1f\", $now - $t0}"),$(rss_kib "$pid"),${cmds:-0},$(cat "$BENCH_TMP/phase" 2>/dev/null)" >>"$out"
    sleep 1
  done
}
phase() { echo "$1" >"$BENCH_TMP/phase"; echo "  [$(date +%T)] $1"; }

echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -srm); $(redis-server --version | cut -d' ' -f1-3)"
echo "load before: $(uptime | sed 's/.*load average: //')"

for dataset in $DATASETS; do
  n=${dataset%x*}
  size=${dataset#*x}
  raw=$((n * (size + 16)))   # values plus 16-byte keys (key:000000000000)
  cache=$(python3 -c "print(max(1 << 20, int($raw * $CACHE_PCT / 100)))")
  label="$((n / 1000000))M x ${size} B"
  echo
  echo "== dataset $label: raw $((raw >> 20)) MiB, hot cache $((cache >> 20)) MiB (${CACHE_PCT}%), maxmemory $MAXMEMORY, $VALUES values"
  budget=$MAXMEMORY
  [ "$budget" = auto ] && budget=$(python3 -c "print(max(64 << 20, $raw // 10))")
  args=(--cache-maxmemory "$cache" --maxmemory "$budget")
  # shellcheck disable=SC2206
  args+=($KVIK_ARGS)
  kport=$(free_port)
  start_kvik "$kport" "kvik-$dataset" "${args[@]}"
  kpid=${PIDS[-1]}
  series=$BENCH_TMP/series-$dataset.csv
  : >"$series"
  sampler "$kpid" "$kport" "$series" &
  PIDS+=($!)

  rport=""
  if [ "$raw" -le $((REDIS_MAX_GB << 30)) ]; then
    rport=$(free_port)
    start_redis "$rport" "redis-$dataset"
  fi

  phase "load kvik: kvik-bench -t set -n $n -r $n --dist seq -d $size -c 50 -P 16"
  t0=$(date +%s.%N)
  "$KVIK_BENCH" -p "$kport" -q -t set -n "$n" -r "$n" --dist seq -d "$size" $VALUE_FLAG -c 50 -P 16 >/dev/null
  t1=$(date +%s.%N)
  echo "  kvik loaded in $(awk "BEGIN {printf \"%.1f\", $t1 - $t0}") s; RSS $(( $(rss_kib "$kpid") >> 10 )) MiB; on disk $(du -sm "$BENCH_TMP/kvik-$dataset" | cut -f1) MiB"
  if [ -n "$rport" ]; then
    phase "load redis"
    "$KVIK_BENCH" -p "$rport" -q -t set -n "$n" -r "$n" --dist seq -d "$size" $VALUE_FLAG -c 50 -P 16 >/dev/null
  fi

  # Reads are measured on a quiet store: the load's compactions (minutes at 10M keys) and
  # those of each side's SET runs are waited out before the next side's GETs.
  phase "settle: RocksDB's compactions after the load"
  t0=$(date +%s.%N)
  settle "$kport" 900
  echo "  compactions after the load took $(awk "BEGIN {printf \"%.1f\", $(date +%s.%N) - $t0}") s"
  phase "measure"
  sides=(kvik hits)
  [ -n "$rport" ] && sides+=(redis)
  for switch in $OFF_SWITCHES; do sides+=("$switch=no"); done
  for round in $(seq 1 "$ROUNDS"); do
    for side in "${sides[@]}"; do
      port=$kport; keys=$n
      [ "$side" = hits ] && keys=$HOT
      [ "$side" = redis ] && port=$rport
      phase "round $round $side"
      [ "$side" = redis ] || settle "$kport" 300
      case $side in *=no) redis-cli -p "$kport" config set "${side%=no}" no >/dev/null ;; esac
      KB_SUFFIX=" uniform" run_kb "$port" "$side" -t get -r "$keys" --dist uniform --duration "$DURATION" -c "$CLIENTS"
      KB_SUFFIX=" zipf 0.99" run_kb "$port" "$side" -t get -r "$keys" --dist zipf --zipf-s 0.99 --duration "$DURATION" -c "$CLIENTS"
      KB_SUFFIX=" (absent keys)" run_kb "$port" "$side" -r "$keys" --dist uniform --duration "$DURATION" -c "$CLIENTS" GET 'key:__rand_int__x'
      KB_SUFFIX=" uniform" run_kb "$port" "$side" -t set -r "$keys" -d "$size" $VALUE_FLAG --dist uniform --duration "$DURATION" -c "$CLIENTS"
      KB_SUFFIX=" 90:10 zipf" run_kb "$port" "$side" --ratio 9:1 -r "$keys" -d "$size" $VALUE_FLAG --dist zipf --duration "$DURATION" -c "$CLIENTS"
      case $side in *=no) redis-cli -p "$kport" config set "${side%=no}" yes >/dev/null ;; esac
    done
  done

  # SET on the whole keyspace against SET on a server that holds 100k keys (same settings).
  phase "SET at $label vs SET at 100k keys"
  sport=$(free_port)
  start_kvik "$sport" "small-$dataset" "${args[@]}"
  "$KVIK_BENCH" -p "$sport" -q -t set -n 100000 -r 100000 --dist seq -d "$size" $VALUE_FLAG -c 50 -P 16 >/dev/null
  settle "$kport" 300
  settle "$sport"
  for round in $(seq 1 "$ROUNDS"); do
    KB_SUFFIX=" uniform (SET scale)" run_kb "$kport" "kvik" -t set -r "$n" -d "$size" $VALUE_FLAG --duration "$DURATION" -c "$CLIENTS"
    KB_SUFFIX=" uniform (SET scale)" run_kb "$sport" "100k" -t set -r 100000 -d "$size" $VALUE_FLAG --duration "$DURATION" -c "$CLIENTS"
  done

  phase "DBSIZE"
  dbsize=$(redis-cli -p "$kport" dbsize)
  "$KVIK_BENCH" -p "$kport" -c 1 -n 2000 --json DBSIZE 2>/dev/null | python3 -c '
import json, sys
t = json.load(sys.stdin)["tests"][0]["latency_ms"]
p50, p99 = t["p50"], t["p99"]
print(f"  DBSIZE = {sys.argv[1]} keys: p50 {p50:.3f} ms, p99 {p99:.3f} ms (kvik-bench -c 1 -n 2000 DBSIZE)")' "$dbsize"
  echo "  RSS now $(( $(rss_kib "$kpid") >> 10 )) MiB; peak over the run $(awk -F, 'BEGIN {m = 0} $2 > m {m = $2} END {print int(m / 1024)}' "$series") MiB"
  echo "  INFO memory: $(redis-cli -p "$kport" info memory | tr -d '\r' | grep -E '^(used_memory_human|maxmemory_human|kvik_[a-z_]*):' | tr '\n' ' ')"

  # Restart on the same directory: time to the first PONG and to the first hit.
  phase "restart"
  redis-cli -p "$kport" shutdown >/dev/null 2>&1 || true
  wait "$kpid" 2>/dev/null || true
  echo "  on disk: $(du -sm "$BENCH_TMP/kvik-$dataset" | cut -f1) MiB"
  t0=$(date +%s%N)
  "$KVIK_BIN" --port "$kport" --dir "$BENCH_TMP/kvik-$dataset" --loglevel warning "${args[@]}" \
    >"$BENCH_TMP/restart-$dataset.log" 2>&1 &
  PIDS+=($!)
  until [ "$(redis-cli -p "$kport" ping 2>/dev/null)" = PONG ]; do sleep 0.005; done
  t1=$(date +%s%N)
  probe=$(printf 'key:%012d' $((n / 2)))
  # STRLEN, not GET: the random values hold NUL bytes, which a shell substitution drops.
  until [ "$(redis-cli -p "$kport" strlen "$probe" 2>/dev/null)" -gt 0 ] 2>/dev/null; do sleep 0.005; done
  t2=$(date +%s%N)
  echo "  restart: first PONG after $(( (t1 - t0) / 1000000 )) ms, first hit ($probe) after $(( (t2 - t0) / 1000000 )) ms (wall clock from exec, redis-cli polling every 5 ms)"
  redis-cli -p "$kport" shutdown >/dev/null 2>&1 || true
  redis-cli -p "$sport" shutdown >/dev/null 2>&1 || true
  [ -n "$rport" ] && { redis-cli -p "$rport" shutdown nosave >/dev/null 2>&1 || true; }
  sleep 1

  echo
  echo "### $label (hot cache ${CACHE_PCT}% of the data)"
  sum_sides=(kvik hits)
  [ -n "$rport" ] && sum_sides+=(redis)
  sum_sides+=(100k)
  for switch in $OFF_SWITCHES; do sum_sides+=("$switch=no"); done
  summarize_kb "kvik at $label" "$PLOT_DIR/scale-${dataset}.svg" "${sum_sides[@]}"
  if [ -s "$series" ]; then
    cp "$series" "$PLOT_DIR/scale-${dataset}-series.csv"
    "$KVIK_BENCH" --plot-series "$series" --plot-out "$PLOT_DIR/scale-${dataset}-rss.svg" \
      --plot-title "kvik $label: RSS and commands/s over the run" 2>/dev/null &&
      echo "plot: $PLOT_DIR/scale-${dataset}-rss.svg"
  fi
  : >"$RESULTS_JSONL"
  : >"$RESULTS"
done
echo "load after: $(uptime | sed 's/.*load average: //')"
