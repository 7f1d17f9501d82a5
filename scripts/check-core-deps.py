#!/usr/bin/env python3
"""Checks that the pipeline core stays free of I/O libraries (docs/architecture.md, "Modules").

Reads `swift package describe --type json` on stdin and follows the target dependencies of BridgeCore,
PipelineTestSupport and BridgeCoreTests. Fails when their closure reaches a system library (librdkafka,
libnghttp2), one of the targets that wrap them (Kafka, HTTP2), SwiftNIO or the application module (Bridge).
Swift-crypto (under APNSCore, for the provider token) is allowed.
"""

import json
import sys

ROOTS = ["BridgeCore", "PipelineTestSupport", "TestWaiting", "Waiting", "BridgeCoreTests", "WaitingTests"]
FORBIDDEN_TARGETS = {"Bridge", "Kafka", "HTTP2", "APNSClient", "APNSSimulator", "TestSupport"}
FORBIDDEN_PRODUCT_PREFIXES = ("NIO",)


def main() -> int:
    package = json.load(sys.stdin)
    targets = {target["name"]: target for target in package["targets"]}
    problems = []
    for root in ROOTS:
        seen, stack = set(), [(root, [root])]
        while stack:
            name, path = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            target = targets[name]
            if name in FORBIDDEN_TARGETS or target.get("module_type") == "SystemLibraryTarget":
                problems.append(" -> ".join(path))
                continue
            for product in target.get("product_dependencies", []):
                if product.startswith(FORBIDDEN_PRODUCT_PREFIXES):
                    problems.append(" -> ".join(path + [product]))
            for dependency in target.get("target_dependencies", []):
                stack.append((dependency, path + [dependency]))
    for problem in problems:
        print(f"check-core-deps: the core reaches {problem.split(' -> ')[-1]}: {problem}", file=sys.stderr)
    if not problems:
        print(f"check-core-deps: {', '.join(ROOTS)} reach no I/O library")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
