#!/usr/bin/env bash
# Pub/Sub fan-out (issue 16): messages delivered per second when one publisher (pipelined, 32
# PUBLISH per round trip, 32-byte payloads) publishes to 1, 10 and 100 subscribers of one
# channel, kvik side by side with redis-server (no persistence), alternating sides for ROUNDS
# rounds. Prints each run, then the medians and the ratio kvik/redis per subscriber count.
#
#   flock /tmp/kvik-bench.lock bench/pubsub.sh               # 3 rounds of 5 s per point
#   QUICK=1 bench/pubsub.sh                                  # 3 rounds of 2 s (make bench)
#   SUBS="1 10 100" PUBLISHERS=2 SECONDS_PER_RUN=10 bench/pubsub.sh
#   OFF=1 bench/pubsub.sh        # adds kvik-off: pubsub-rtc-max-receivers 0 (every PUBLISH on a worker)
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."

ensure_redis
PUBSUB_BENCH=${PUBSUB_BENCH:-$CARGO_TARGET_DIR/release/kvik-pubsub-bench}
if [ ! -x "$PUBSUB_BENCH" ]; then
  cargo build --release -p kvik-bench --bin kvik-pubsub-bench >&2
fi

if [ "${QUICK:-0}" = 1 ]; then SECONDS_PER_RUN=${SECONDS_PER_RUN:-2}; fi
ROUNDS=${ROUNDS:-3}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-5}
SUBS=${SUBS:-1 10 100}
PUBLISHERS=${PUBLISHERS:-1}

declare -A PORT
SIDES=(kvik redis)
[ "${OFF:-0}" = 1 ] && SIDES=(kvik kvik-off redis)
for side in "${SIDES[@]}"; do PORT[$side]=$(free_port); done
start_kvik "${PORT[kvik]}" kvik
[ "${OFF:-0}" = 1 ] && start_kvik "${PORT[kvik-off]}" kvik-off --pubsub-rtc-max-receivers 0
start_redis "${PORT[redis]}" redis

echo "machine: $(nproc) cores, $(uname -srm); $(redis-server --version | cut -d' ' -f1-3); load: $(uptime | sed 's/.*load average: //')"
echo "command: kvik-pubsub-bench <port> <subscribers> $PUBLISHERS $SECONDS_PER_RUN 32 32; $ROUNDS rounds, alternating ${SIDES[*]}"
RESULTS=$BENCH_TMP/pubsub.txt
for subs in $SUBS; do
  for round in $(seq 1 "$ROUNDS"); do
    for side in "${SIDES[@]}"; do
      line=$("$PUBSUB_BENCH" "${PORT[$side]}" "$subs" "$PUBLISHERS" "$SECONDS_PER_RUN" 32 32)
      echo "$side round=$round $line"
      echo "$side $subs $(echo "$line" | sed 's/.*delivered_per_sec=//')" >>"$RESULTS"
    done
  done
done

echo
echo "medians, delivered messages per second; ratios against redis"
python3 - "$RESULTS" "${SIDES[@]}" <<'PY'
import sys, statistics, collections
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    side, subs, rate = line.split()
    runs[(side, int(subs))].append(float(rate))
sides = sys.argv[2:]
kviks = [s for s in sides if s != "redis"]
print("subscribers " + " ".join(f"{s:>16}" for s in sides) + " " + " ".join(f"{s + '/redis':>16}" for s in kviks))
for subs in sorted({s for _, s in runs}):
    med = {s: statistics.median(runs[(s, subs)]) for s in sides}
    print(f"{subs:>11} " + " ".join(f"{med[s]:>16,.0f}" for s in sides) + " "
          + " ".join(f"{med[s] / med['redis']:>16.2f}" for s in kviks))
PY
