# Fuzzing and ThreadSanitizer (docs/fuzzing.md).
#
# make fuzz        libFuzzer + AddressSanitizer build of the six targets in .build-fuzz, then each target for
#                  FUZZ_SECONDS from the committed corpus Fuzz/corpus/<target>; new inputs and crashes go to
#                  FUZZ_OUT, never into the committed corpus. FUZZ_TARGETS picks targets, FUZZ_ARGS adds libFuzzer
#                  options (e.g. FUZZ_ARGS=-jobs=2).
# make fuzz-smoke  the same targets' stand-alone drivers from the normal debug build: the committed corpus plus
#                  FUZZ_SMOKE_MUTATIONS seeded mutations each. Part of `make test`.
# make tsan        the whole test suite under ThreadSanitizer in .build-tsan (slow; not part of `make test`).
FUZZ_SECONDS         ?= 60
FUZZ_SMOKE_MUTATIONS ?= 10000
FUZZ_TARGETS         ?= FuzzEventParser FuzzTemplate FuzzConfiguration FuzzSimulatorRequest FuzzBinaryProtocol \
                        FuzzDeliveryStateMachine
FUZZ_SCRATCH         ?= .build-fuzz
FUZZ_OUT             ?= $(FUZZ_SCRATCH)/findings
FUZZ_ARGS            ?=
# Checks of the harnesses for documented behaviour the code does not have yet. make fuzz-smoke skips them so that
# make test stays green until it lands; then empty this list. make fuzz always runs every check. Empty now.
FUZZ_SMOKE_SKIP_CHECKS ?=
FUZZ_BUILD_FLAGS     := --sanitize=fuzzer -Xswiftc -sanitize=fuzzer,address -Xswiftc -DPUSHBRIDGE_LIBFUZZER \
                        --scratch-path $(FUZZ_SCRATCH)
TSAN_SCRATCH         ?= .build-tsan
TSAN_ARGS            ?=

.PHONY: fuzz fuzz-build fuzz-smoke tsan

fuzz-build: deps
	@for target in $(FUZZ_TARGETS); do \
		$(SWIFT) build $(FUZZ_BUILD_FLAGS) --product $$target $(BUILD_FLAGS) || exit 1; \
	done

fuzz: fuzz-build
	@FUZZ_TARGETS="$(FUZZ_TARGETS)" FUZZ_SKIP_CHECKS= \
		scripts/fuzz.sh libfuzzer $(FUZZ_SCRATCH)/debug $(FUZZ_OUT) $(FUZZ_SECONDS) $(FUZZ_ARGS)

fuzz-smoke: deps
	@for target in $(FUZZ_TARGETS); do $(SWIFT) build --product $$target $(BUILD_FLAGS) -q || exit 1; done
	@FUZZ_TARGETS="$(FUZZ_TARGETS)" FUZZ_SKIP_CHECKS="$(FUZZ_SMOKE_SKIP_CHECKS)" \
		scripts/fuzz.sh smoke .build/debug .build/fuzz-smoke $(FUZZ_SMOKE_MUTATIONS)

## make tsan: races are reported on stderr (TSAN_LOG=path/prefix writes them to files instead). Every executable of
## the build (the test bundle and the pushbridge the tests start) links scripts/tsan-interpose.c, which makes
## librdkafka's C11 threads and Swift's Mutex visible to ThreadSanitizer (docs/fuzzing.md);
## tsan-suppressions.txt holds races inside third-party C libraries, each with its reason. The test modules run one
## after another (TSAN_MODULES): all at once, ThreadSanitizer's slowdown on two cores makes tests that wait 10 s
## for a condition time out. Every module runs; the target fails when any module failed or reported a race.
CLANG        ?= clang
TSAN_LOG     ?=
TSAN_MODULES ?= $(sort $(notdir $(wildcard Tests/*Tests)))
tsan: deps
	mkdir -p $(TSAN_SCRATCH)
	$(CLANG) -c -fPIC -O1 -Wall -Werror -o $(TSAN_SCRATCH)/tsan-interpose.o scripts/tsan-interpose.c
	$(SWIFT) build --build-tests --sanitize=thread --scratch-path $(TSAN_SCRATCH) \
		-Xlinker $(CURDIR)/$(TSAN_SCRATCH)/tsan-interpose.o $(BUILD_FLAGS)
	@failed=""; for module in $(TSAN_MODULES); do \
		echo "tsan: $$module"; \
		SWIFT_BACKTRACE=enable=no \
		TSAN_OPTIONS="suppressions=$(CURDIR)/tsan-suppressions.txt halt_on_error=0 second_deadlock_stack=1 \
		$(if $(TSAN_LOG),log_path=$(TSAN_LOG)) $(TSAN_OPTIONS)" \
		$(SWIFT) test --skip-build --sanitize=thread --scratch-path $(TSAN_SCRATCH) $(BUILD_FLAGS) \
			--filter "^$$module\." $(TSAN_ARGS) || failed="$$failed $$module"; \
	done; \
	if [ -n "$$failed" ]; then echo "tsan: failed or reported races:$$failed" >&2; exit 1; fi
