# The bridge end to end: `make bench` pre-loads BENCH_EVENTS events into the embedded Kafka cluster, runs
# `pushbridge run` (its own process) against an APNs server (another process: nghttpd by default, or
# `pushbridge simulator` with BENCH_ARGS="--server simulator") until every outcome is read back, then h2load against
# the same server over one connection. Results: docs/benchmarks.md, "## Bridge end to end". BENCH_ARGS adds options,
# e.g. BENCH_ARGS="--connections 4" or BENCH_ARGS=--log-sender (Kafka side alone).
BENCH_EVENTS ?= 200000
BENCH_ARGS   ?=

.PHONY: bench

bench: deps
	$(SWIFT) build -c release --product pushbridge $(BUILD_FLAGS)
	$(SWIFT) build -c release --product BridgeBench $(BUILD_FLAGS)
	.build/release/BridgeBench --events $(BENCH_EVENTS) $(BENCH_ARGS)
