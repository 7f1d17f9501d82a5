# Legacy binary provider protocol: `make bench-binary` measures PushBridge's BinaryClient on one TLS connection
# against `pushbridge simulator --binary-port`, with a bare pre-encoded writer as the reference in the same run.
# See docs/benchmarks.md, "Binary provider protocol".
BENCH_BINARY_NOTIFICATIONS ?= 200000
BENCH_BINARY_ARGS          ?=

.PHONY: bench-binary
bench-binary: deps
	$(SWIFT) build -c release --product pushbridge $(BUILD_FLAGS)
	$(SWIFT) build -c release --product BinaryBench $(BUILD_FLAGS)
	.build/release/BinaryBench --notifications $(BENCH_BINARY_NOTIFICATIONS) --pushbridge .build/release/pushbridge $(BENCH_BINARY_ARGS)
