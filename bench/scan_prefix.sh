#!/usr/bin/env bash
# SCAN MATCH, KEYS and HSCAN MATCH with a pattern that starts with literal text, at size: kvik
# seeking the prefix (`scan-prefix-seek yes`, the default), kvik walking every key (`no`, set by
# CONFIG SET on the same server between runs) and redis-server holding the same data, rounds
# alternating the three. Data: N keys of 100-byte text values loaded in order with kvik-bench
# (key:000000000000 ...), and a hash `big` of ~FIELDS fields (redis-benchmark HSET of random
# element:<12 digits> fields). Prints one CSV row per run (items, calls, seconds; KEYS seconds).
#
#   bench/scan_prefix.sh                    # N=10000000 FIELDS=1000000 ROUNDS=2
#   N=2000000 ROUNDS=1 bench/scan_prefix.sh
#
# Run it under the machine-wide benchmark lock: flock /tmp/kvik-bench.lock bench/scan_prefix.sh
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."
ensure_redis
ensure_kvik_bench

N=${N:-10000000}
FIELDS=${FIELDS:-1000000}
ROUNDS=${ROUNDS:-2}
# Patterns matching 1/10,000 and 1/100 of the keys of the default N, and ~1/10,000 of the fields.
KEY_PATTERNS=${KEY_PATTERNS:-key:000000123* key:0000012*}
FIELD_PATTERN=${FIELD_PATTERN:-element:0000001234*}

kport=$(free_port)
rport=$(free_port)
start_kvik "$kport" kvik
start_redis "$rport" redis
for port in $kport $rport; do
  "$KVIK_BENCH" -p "$port" -q -t set -n "$N" -r "$N" --dist seq -d 100 --text-values -c 50 -P 16 >/dev/null
  redis-benchmark -p "$port" -q -c 50 -r "$FIELDS" -n $((FIELDS * 3)) -P 16 HSET big element:__rand_int__ v >/dev/null
done
echo "keys: kvik $(redis-cli -p "$kport" dbsize), redis $(redis-cli -p "$rport" dbsize); fields of big: kvik $(redis-cli -p "$kport" hlen big), redis $(redis-cli -p "$rport" hlen big)"
echo "side,command,pattern,count,items,calls,seconds,keys_seconds"
one() { # side port command pattern count [key]
  local side=$1 port=$2; shift 2
  case $side in
    kvik-seek) redis-cli -p "$port" config set scan-prefix-seek yes >/dev/null ;;
    kvik-walk) redis-cli -p "$port" config set scan-prefix-seek no >/dev/null ;;
  esac
  python3 bench/scan_prefix.py "$port" "$side" "$@"
}
for _ in $(seq "$ROUNDS"); do
  for side in kvik-seek kvik-walk redis; do
    port=$kport
    [ "$side" = redis ] && port=$rport
    for pattern in $KEY_PATTERNS; do one "$side" "$port" SCAN "$pattern" 1000; done
    one "$side" "$port" SCAN "${KEY_PATTERNS%% *}" 10
    one "$side" "$port" HSCAN "$FIELD_PATTERN" 1000 big
  done
done
