# Source formatting: `swift format` (shipped with the toolchain) with the repository's .swift-format, checked as part
# of `make test`.
.PHONY: format format-check
FORMAT_PATHS := Sources Tests Benchmarks Fuzz Package.swift

## make format: rewrites the Swift sources in place to the repository's format.
format:
	$(SWIFT) format format --in-place --recursive $(FORMAT_PATHS)

## make format-check: fails, naming file and line, when a Swift source is not formatted (`make format` fixes it).
format-check:
	$(SWIFT) format lint --strict --recursive $(FORMAT_PATHS)

test: format-check
