# kvik: build, run and test.
#
# One cargo profile (release) serves `make run`, the tests and the benchmarks, and the target
# directory lives outside the checkout, so RocksDB's C++ (about 15 minutes on 2 cores) is
# compiled once per machine and reused by every clone, including CI's.

# Caveat: cargo judges the workspace's own crates fresh by file times, so two checkouts sharing
# this directory can pick up each other's builds when one has older files (a fresh clone never
# does). After building another checkout, `touch crates/*/src/*.rs` here, or set CARGO_TARGET_DIR.
export CARGO_TARGET_DIR ?= $(HOME)/.cache/kvik-target
CARGO   ?= cargo
PROFILE := --release
BIN     := $(CARGO_TARGET_DIR)/release

.PHONY: all deps build run test fmt lint bench bench-full clean-data

all: build

deps:
	@./scripts/deps.sh

build: deps
	$(CARGO) build $(PROFILE) --workspace --bins

## Start kvik-server on 127.0.0.1:6379 with data in ./kvik-data (pass more flags with ARGS="...").
run: build
	$(BIN)/kvik-server --dir ./kvik-data $(ARGS)

## The whole suite: formatting, lints, unit, property and integration tests.
test: deps fmt lint
	./scripts/cargo-test.sh $(PROFILE) --workspace

fmt:
	$(CARGO) fmt --all -- --check

lint:
	$(CARGO) clippy $(PROFILE) --workspace --all-targets -- -D warnings

## Benchmarks. Each script starts its own servers on free ports, runs the sides alternately
## (A B A B ..., 3 rounds or more) and prints medians and ratios, the form docs/benchmarks.md
## records them in; all run under one machine-wide lock so two benchmarks never overlap.
## `bench` runs the quick sizes (QUICK=1 plus smaller counts: under 10 minutes on 2 cores in
## all); `bench-full` the long ones (the scripts' defaults). Never part of `make test`.
BENCH_LOCK := flock /tmp/kvik-bench.lock

bench: build
	$(BENCH_LOCK) env QUICK=1 bash bench/baseline.sh
	$(BENCH_LOCK) env QUICK=1 bash bench/rate.sh
	$(BENCH_LOCK) env QUICK=1 OPS=30000 bash bench/client_batch.sh
	$(BENCH_LOCK) env QUICK=1 CALLS=50 bash bench/client_multiget.sh
	$(BENCH_LOCK) env QUICK=1 N=30000 bash bench/pool.sh
	$(BENCH_LOCK) env QUICK=1 IDLE=5 bash bench/pool_idle.sh
	$(BENCH_LOCK) env N=100000 HOT=25000 GETS=100000 bash bench/cache.sh
	$(BENCH_LOCK) env QUICK=1 bash bench/cluster_slots.sh
	$(BENCH_LOCK) env QUICK=1 bash bench/collections.sh
	$(BENCH_LOCK) env QUICK=1 bash bench/scale.sh
	$(BENCH_LOCK) env QUICK=1 bash bench/pubsub.sh
	$(BENCH_LOCK) env QUICK=1 bash bench/replication.sh
	$(BENCH_LOCK) env QUICK=1 bash bench/io_poll.sh
	$(BENCH_LOCK) env ROUNDS=1 N=200000 bash bench/hot_key.sh
	$(BENCH_LOCK) env SIZES=4000,20000 bash bench/big_commands.sh
	$(BENCH_LOCK) env ROUNDS=1 N=200000 KEEP=2000 READS=100 bash bench/tombstones.sh
	$(BENCH_LOCK) env ROUNDS=1 N=200000 SECS=2 bash bench/slow_commands.sh
	$(BENCH_LOCK) env QUICK=1 bash bench/expiry.sh
	$(BENCH_LOCK) env QUICK=1 KIND=fields RATES=5000 bash bench/expiry.sh
	$(BENCH_LOCK) env N=1500000 FIELDS=200000 ROUNDS=1 bash bench/scan_prefix.sh
	$(BENCH_LOCK) env M=200000 ROUNDS=1 DURATION=3s bash bench/zset_rank.sh
	$(BENCH_LOCK) env N=200000 ROUNDS=1 bash bench/big_values.sh
	$(BENCH_LOCK) env SIZES=65536,1048576 ROUNDS=1 bash bench/string_edits.sh
	$(BENCH_LOCK) env ROUNDS=1 N=20000 PUSHES=100000 bash bench/lrange.sh
	$(BENCH_LOCK) env LISTS=100000 ROUNDS=1 DURATION=3s WARM=3s bash bench/list_heads.sh

bench-full: build
	$(BENCH_LOCK) bash bench/baseline.sh
	$(BENCH_LOCK) bash bench/rate.sh
	$(BENCH_LOCK) bash bench/client_batch.sh
	$(BENCH_LOCK) bash bench/client_multiget.sh
	$(BENCH_LOCK) bash bench/pool.sh
	$(BENCH_LOCK) bash bench/pool_idle.sh
	$(BENCH_LOCK) env N=1000000 HOT=200000 GETS=500000 ROUNDS=5 bash bench/cache.sh
	$(BENCH_LOCK) bash bench/cluster_slots.sh
	$(BENCH_LOCK) bash bench/collections.sh
	$(BENCH_LOCK) bash bench/scale.sh
	$(BENCH_LOCK) bash bench/pubsub.sh
	$(BENCH_LOCK) bash bench/replication.sh
	$(BENCH_LOCK) bash bench/io_poll.sh
	$(BENCH_LOCK) bash bench/hot_key.sh
	$(BENCH_LOCK) bash bench/big_commands.sh
	$(BENCH_LOCK) bash bench/tombstones.sh
	$(BENCH_LOCK) bash bench/slow_commands.sh
	$(BENCH_LOCK) bash bench/expiry.sh
	$(BENCH_LOCK) env KIND=fields RATES="5000 8000" bash bench/expiry.sh
	$(BENCH_LOCK) bash bench/scan_prefix.sh
	$(BENCH_LOCK) bash bench/zset_rank.sh
	$(BENCH_LOCK) bash bench/big_values.sh
	$(BENCH_LOCK) bash bench/string_edits.sh
	$(BENCH_LOCK) bash bench/lrange.sh
	$(BENCH_LOCK) bash bench/list_heads.sh

clean-data:
	rm -rf ./kvik-data
