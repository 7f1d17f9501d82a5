# HTTP/2 layer: `make bench-apns` compares PushBridge's HTTP/2 client with h2load (nghttp2) against nghttpd on
# 127.0.0.1 over one TLS connection, with APNs-shaped requests. See docs/benchmarks.md.
BENCH_APNS_REQUESTS ?= 200000
BENCH_APNS_ARGS     ?=

.PHONY: bench-apns
bench-apns: deps
	$(SWIFT) build -c release --product APNSBench $(BUILD_FLAGS)
	.build/release/APNSBench --requests $(BENCH_APNS_REQUESTS) $(BENCH_APNS_ARGS)
