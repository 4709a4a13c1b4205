#!/usr/bin/env bash
# Emptying a big collection by pops: ZPOPMIN, ZPOPMAX and SPOP, on a fresh server per side and
# round, each collection filled by redis-benchmark (-t zadd / -t sadd, -n N -r 100000:
# ~33,000 distinct members at N=40000) and popped as many times as it has members (-c 50). A
# pop that stepped over the tombstones of the members popped before slowed as the set emptied
# (docs/benchmarks.md sections 42, 43); the rate of a run cut at TIMEOUT seconds is the members
# it popped per second. Before the ZPOPMAX and SPOP runs, the full collection is read by READS
# ZRANDMEMBER (and ZRANDMEMBER 5 WITHSCORES), SRANDMEMBER (and SRANDMEMBER 5) requests.
# Sides alternate per round: kvik binaries given as arguments (the first is OLD, the second NEW),
# then redis-server with appendonly yes, appendfsync everysec.
#
#   bench/pops.sh OLD_BIN NEW_BIN                       # ROUNDS=3 N=40000 TIMEOUT=60
#   ROUNDS=1 TIMEOUT=20 bench/pops.sh target/release/kvik-server
#
# Run it under the machine-wide benchmark lock: flock /tmp/kvik-bench.lock bench/pops.sh ...
source "$(dirname "$0")/lib.sh"
ensure_redis

ROUNDS=${ROUNDS:-3}
N=${N:-40000}
TIMEOUT=${TIMEOUT:-60}
READS=${READS:-50000}
BINS=("$@")

# pop_rate port key card_cmd pop_cmd: pops the key's members, prints "popped rate".
pop_rate() {
  local port=$1 key=$2 card=$3 pop=$4
  local before after start end
  before=$(redis-cli -p "$port" "$card" "$key")
  start=$(date +%s.%N)
  timeout "$TIMEOUT" redis-benchmark -p "$port" -q -n "$before" -c 50 "$pop" "$key" \
    >/dev/null 2>&1 || true
  end=$(date +%s.%N)
  after=$(redis-cli -p "$port" "$card" "$key")
  python3 -c "p=$before-$after; print(p, round(p/($end-$start)))"
}

run_side() { # label
  local port=$BACKEND_PORT label=$1 zmin zmax spop
  redis-benchmark -p "$port" -q -n "$N" -c 50 -r 100000 -t zadd >/dev/null 2>&1
  zmin=$(pop_rate "$port" myzset ZCARD ZPOPMIN)
  redis-benchmark -p "$port" -q -n "$N" -c 50 -r 100000 -t zadd >/dev/null 2>&1
  zrand1=$(read_rate "$port" ZRANDMEMBER myzset)
  zrand5=$(read_rate "$port" ZRANDMEMBER myzset 5 WITHSCORES)
  zmax=$(pop_rate "$port" myzset ZCARD ZPOPMAX)
  redis-benchmark -p "$port" -q -n "$N" -c 50 -r 100000 -t sadd >/dev/null 2>&1
  srand1=$(read_rate "$port" SRANDMEMBER myset)
  srand5=$(read_rate "$port" SRANDMEMBER myset 5)
  spop=$(pop_rate "$port" myset SCARD SPOP)
  printf '%-10s ZPOPMIN %s  ZPOPMAX %s  SPOP %s   (members popped, popped/s)\n' \
    "$label" "$zmin" "$zmax" "$spop"
  printf '%-10s SRANDMEMBER %s  SRANDMEMBER 5 %s  ZRANDMEMBER %s  ZRANDMEMBER 5 WITHSCORES %s   (req/s, %s requests)\n' \
    "$label" "$srand1" "$srand5" "$zrand1" "$zrand5" "$READS"
}

# read_rate port command...: requests per second of READS runs of the command (-c 50), or
# "cut" if they did not finish within TIMEOUT seconds.
read_rate() {
  local port=$1 rate; shift
  rate=$(timeout "$TIMEOUT" redis-benchmark -p "$port" -q -n "$READS" -c 50 "$@" 2>&1 |
    tr '\r' '\n' | grep -o '[0-9.]* requests per second' | cut -d' ' -f1 || true)
  echo "${rate:-cut}"
}

for r in $(seq "$ROUNDS"); do
  echo "round $r"
  i=0
  for bin in "${BINS[@]}"; do
    i=$((i + 1))
    KVIK_BIN=$bin start_backend kvik "kvik$i-$r"
    run_side "kvik$i"
    kill "${PIDS[-1]}"; wait "${PIDS[-1]}" 2>/dev/null || true
  done
  BACKEND_PORT=$(free_port)
  start_redis "$BACKEND_PORT" "redis-$r" --appendonly yes --appendfsync everysec
  run_side redis-aof
  kill "${PIDS[-1]}"; wait "${PIDS[-1]}" 2>/dev/null || true
done
