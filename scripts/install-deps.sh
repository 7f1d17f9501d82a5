#!/usr/bin/env bash
# Installs the Debian packages PushBridge builds, tests and benchmarks with, when any is missing.
# Used by `make test`, `make run` and the benchmark targets; safe to run again (it does nothing then).
set -euo pipefail

packages=(
    librdkafka-dev   # Kafka client (librdkafka 2.0.2) and its mock cluster
    libnghttp2-dev   # HTTP/2 framing and HPACK
    libjemalloc-dev  # the allocator pushbridge links (docs/operations.md, "Memory")
    libssl-dev       # OpenSSL headers, for a complete native toolchain
    libstdc++-12-dev # C++ standard library headers: swift-nio-ssl and swift-crypto compile BoringSSL's C++ sources
    pkg-config       # how SwiftPM finds the two libraries above
    kcat             # Kafka CLI: the demo prints how to join its cluster with it, and the docs use it
    nghttp2-client   # h2load: the reference HTTP/2 client for benchmarks
    nghttp2-server   # nghttpd: the reference HTTP/2 server for benchmarks
    openssl          # test certificates
    tinyproxy        # a real HTTP CONNECT proxy for the egress proxy tests (docs/configuration.md, "apns.proxy")
    ca-certificates  # TLS to PyPI for the project's Python tools
    python3          # record schema checks, deployment linters
    python3-venv     # their virtual environment, .build-lint/venv (Debian 12 refuses system-wide pip: PEP 668)
)

missing=()
for package in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$package")
    fi
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "Installing missing Debian packages: ${missing[*]}"
if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then
        sudo="sudo"
    else
        echo "error: not root and no sudo; install these packages first: ${missing[*]}" >&2
        exit 1
    fi
fi
${sudo:-} apt-get update -qq
DEBIAN_FRONTEND=noninteractive ${sudo:-} apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
