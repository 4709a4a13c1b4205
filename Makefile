# kvik: build, run and test.
#
# One cargo profile (release) serves `make run`, the tests and the benchmarks, and the target
# directory lives outside the checkout, so RocksDB's C++ (about 15 minutes on 2 cores) is
# compiled once per machine and reused by every clone, including CI's.

export CARGO_TARGET_DIR ?= $(HOME)/.cache/kvik-target
CARGO   ?= cargo
PROFILE := --release
BIN     := $(CARGO_TARGET_DIR)/release

.PHONY: all deps build run test fmt lint bench clean-data

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
	$(CARGO) test $(PROFILE) --workspace

fmt:
	$(CARGO) fmt --all -- --check

lint:
	$(CARGO) clippy $(PROFILE) --workspace --all-targets -- -D warnings

## Benchmarks, quick sizes (a few minutes each); each prints medians and ratios from one run,
## the form docs/benchmarks.md records them in. Never part of `make test`.
bench: build
	bash bench/baseline.sh
	bash bench/client_batch.sh
	bash bench/client_multiget.sh

clean-data:
	rm -rf ./kvik-data
