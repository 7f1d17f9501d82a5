# Routing: the mapper benchmark (SPEC §2 example route, one core). Results: docs/benchmarks.md, "## Mapper".
.PHONY: bench-mapper

bench-mapper: deps
	$(SWIFT) build -c release --product MapperBench $(BUILD_FLAGS)
	.build/release/MapperBench $(or $(BENCH_SECONDS),3)
