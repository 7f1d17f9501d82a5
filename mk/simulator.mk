# The APNs simulator under load: `make bench-simulator` runs `pushbridge simulator` (release build) and measures its
# CPU per request under `h2load -c 1 -m 100` with BridgeBench's request. See docs/benchmarks.md, "APNs simulator".
BENCH_SIMULATOR_REQUESTS ?= 200000

.PHONY: bench-simulator
bench-simulator: deps
	$(SWIFT) build -c release --product pushbridge $(BUILD_FLAGS)
	scripts/bench-simulator.sh .build/release/pushbridge $(BENCH_SIMULATOR_REQUESTS)
