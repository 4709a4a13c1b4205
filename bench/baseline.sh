#!/usr/bin/env bash
# The first row of docs/benchmarks.md: redis-benchmark SET/GET against kvik and against
# redis-server (Debian's package; plain, and with appendonly yes + appendfsync everysec, the
# durable peer), all started here on free ports, run alternately A B C A B C ... and summarised
# as medians and ratios.
#
#   bench/baseline.sh                 # 3 rounds, 200000 requests, -c 50, -P 1 and -P 16
#   ROUNDS=5 N=100000 bench/baseline.sh
source "$(dirname "$0")/lib.sh"

ROUNDS=${ROUNDS:-3}
N=${N:-200000}
CLIENTS=${CLIENTS:-50}
RESULTS=$BENCH_TMP/results.csv

KVIK_PORT=$(free_port); REDIS_PORT=$(free_port); AOF_PORT=$(free_port)
start_kvik "$KVIK_PORT" kvik
start_redis "$REDIS_PORT" redis
start_redis "$AOF_PORT" redis-aof --appendonly yes --appendfsync everysec

echo "machine: $(nproc) cores, $(uname -srm); $(redis-server --version | cut -d' ' -f1-3)"
echo "command: redis-benchmark -t set,get -n $N -r 100000 -c $CLIENTS [-P 16] --csv; $ROUNDS rounds, alternating"
for pipeline in 1 16; do
  for round in $(seq 1 "$ROUNDS"); do
    for side in kvik redis-aof redis; do
      case $side in
        kvik) port=$KVIK_PORT ;;
        redis) port=$REDIS_PORT ;;
        redis-aof) port=$AOF_PORT ;;
      esac
      run_rb "$port" "$side" -t set,get -n "$N" -r 100000 -c "$CLIENTS" -P "$pipeline"
    done
  done
  sed -i "s/^\([^,]*\),\(SET\|GET\),/\1,\2 -P $pipeline,/" "$RESULTS"
done
summarize kvik redis-aof redis
