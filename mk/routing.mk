# Routing: the mapper benchmark (the example route `order-shipped` of config/pushbridge.yaml, one core). Results: docs/benchmarks.md, "## Mapper".
.PHONY: bench-mapper

bench-mapper: deps
	$(SWIFT) build -c release --product MapperBench $(BUILD_FLAGS)
	.build/release/MapperBench $(or $(BENCH_SECONDS),3)
