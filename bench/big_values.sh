#!/usr/bin/env bash
# One command at a time on big values (bench/big_values.py): a list, hash, set, sorted set, a
# sorted set of one score and a stream of N members each, and an 8 MB string, on kvik with its
# defaults, the same kvik with the features for big values switched off (CONFIG SET
# zset-rank-index-min-len 0: ranks, offsets, ZLEXCOUNT and random members walk;
# set-rank-index no: SRANDMEMBER, HRANDFIELD and SPOP walk; string-edit-inline-max 0: APPEND
# and SETRANGE rewrite the whole string) and redis-server
# holding the same data; rounds alternate the sides. Each cell is the median latency of one
# command in flight (ms); a command whose cost grows with the value's size shows here, where
# a throughput run of small values cannot. ZREMRANGEBYRANK and LSET write: each call removes
# one member or rewrites one element.
#
#   bench/big_values.sh                     # N=1000000 ROUNDS=2
#   N=200000 ROUNDS=1 bench/big_values.sh
#
# Run it under the machine-wide benchmark lock: flock /tmp/kvik-bench.lock bench/big_values.sh
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."
ensure_redis

N=${N:-1000000}
ROUNDS=${ROUNDS:-2}
RESULTS=$BENCH_TMP/big_values.tsv

kport=$(free_port)
rport=$(free_port)
start_kvik "$kport" kvik
start_redis "$rport" redis
for port in $kport $rport; do
  echo "loading $N members per value on port $port"
  python3 bench/big_values.py load "$port" "$N"
done
# The loads' last flushes and compactions settle before the first timing.
settle "$kport"
switches() { # yes | no
  if [ "$1" = yes ]; then
    redis-cli -p "$kport" config set zset-rank-index-min-len 2048 set-rank-index yes \
      string-edit-inline-max 64kb
  else
    redis-cli -p "$kport" config set zset-rank-index-min-len 0 set-rank-index no \
      string-edit-inline-max 0
  fi >/dev/null
}
for round in $(seq "$ROUNDS"); do
  for side in kvik kvik-off redis; do
    port=$kport
    case $side in
      kvik) switches yes ;;
      kvik-off) switches no ;;
      redis) port=$rport ;;
    esac
    echo "round $round: $side"
    python3 bench/big_values.py run "$port" "$N" | sed "s/^/$side\t/" >>"$RESULTS"
  done
done
switches yes
echo "kvik rank indexes: $(redis-cli -p "$kport" info stats | tr -d '\r' | grep '^zset_rank_index' | tr '\n' ' ')"
python3 - "$RESULTS" "$N" <<'PY'
import statistics, sys
rows, order = {}, []
for line in open(sys.argv[1]):
    side, case, ms = line.rstrip("\n").split("\t")
    if case not in order:
        order.append(case)
    rows.setdefault((side, case), []).append(float(ms))
sides = ["kvik", "kvik-off", "redis"]
print(f"\nmedian ms per command, {int(sys.argv[2]):,} members per value, an 8 MB string")
print("| command | kvik | kvik, switches off | redis-server | kvik-off/kvik | redis/kvik |")
print("|---|---|---|---|---|---|")
for case in order:
    med = {s: statistics.median(rows[(s, case)]) for s in sides if (s, case) in rows}
    if len(med) < 3:
        continue
    print(f"| {case} | {med['kvik']:.3f} | {med['kvik-off']:.3f} | {med['redis']:.3f} "
          f"| {med['kvik-off'] / med['kvik']:.1f} | {med['redis'] / med['kvik']:.2f} |")
PY
