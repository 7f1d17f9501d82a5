# Kafka layer: consume throughput of the Swift layer vs. a plain C loop over the same librdkafka.
.PHONY: bench-kafka

## make bench-kafka: release build of Benchmarks/KafkaConsume, then run it (BENCH_MESSAGES=N to resize).
bench-kafka: deps
	$(SWIFT) build -c release --product KafkaConsumeBenchmark $(BUILD_FLAGS)
	.build/release/KafkaConsumeBenchmark
