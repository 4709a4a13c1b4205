#!/usr/bin/env bash
# Rank queries of a big sorted set (a leaderboard): ZRANK, ZREVRANK and ZCOUNT of random
# members and scores in a set of M members, and ZADD score updates into it, on kvik counting
# through its rank index (`zset-rank-index-min-len`, the default 2048), kvik walking (the
# setting 0, by CONFIG SET on the same server, which also drops the index: its ZADD row is the
# write without an index to keep) and redis-server holding the same set; rounds alternate the
# sides (kvik's first ZRANK of a round builds the index again: one walk of the set).
# kvik-bench -c 50 for DURATION each; the walking side's ZRANK of a member in the middle
# steps over half a million entries, so expect a few dozen requests.
#
#   bench/zset_rank.sh                      # M=1000000 ROUNDS=2 DURATION=5s
#   M=200000 ROUNDS=1 bench/zset_rank.sh
#
# Run it under the machine-wide benchmark lock: flock /tmp/kvik-bench.lock bench/zset_rank.sh
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."
ensure_redis
ensure_kvik_bench

M=${M:-1000000}
ROUNDS=${ROUNDS:-2}
DURATION=${DURATION:-5s}
PLOT=${PLOT:--}
RESULTS=$BENCH_TMP/results.csv

kport=$(free_port)
rport=$(free_port)
start_kvik "$kport" kvik
kpid=${PIDS[-1]}
start_redis "$rport" redis
rpid=${PIDS[-1]}
for port in $kport $rport; do python3 bench/zset_rank.py "$port" lb "$M"; done
echo "members: kvik $(redis-cli -p "$kport" zcard lb), redis $(redis-cli -p "$rport" zcard lb)"
queries=(
  "ZRANK lb player:__rand_int__"
  "ZREVRANK lb player:__rand_int__"
  "ZCOUNT lb __rand_int__ +inf"
)
for _ in $(seq "$ROUNDS"); do
  for side in kvik kvik-walk redis; do
    port=$kport pid=$kpid
    case $side in
      kvik) redis-cli -p "$port" config set zset-rank-index-min-len 2048 >/dev/null ;;
      kvik-walk) redis-cli -p "$port" config set zset-rank-index-min-len 0 >/dev/null ;;
      redis) port=$rport pid=$rpid ;;
    esac
    for query in "${queries[@]}"; do
      # shellcheck disable=SC2086
      KB_PID=$pid run_kb "$port" "$side" -c 50 -r "$M" --duration "$DURATION" $query
    done
    # Score updates of random members: the index (on kvik) follows each one.
    KB_PID=$pid run_kb "$port" "$side" -c 50 -r "$M" --duration "$DURATION" ZADD lb __rand_int__ player:__rand_int__
  done
done
echo "kvik rank indexes: $(redis-cli -p "$kport" info stats | tr -d '\r' | grep '^zset_rank_index' | tr '\n' ' ')"
summarize_kb "rank queries of a ${M}-member sorted set" "$PLOT" kvik kvik-walk redis
