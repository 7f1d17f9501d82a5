#!/usr/bin/env bash
# Installs the Debian packages PushBridge builds, tests and benchmarks with, when any is missing.
# Used by `make test`, `make run` and the benchmark targets; safe to run again (it does nothing then).
set -euo pipefail

packages=(
    librdkafka-dev   # Kafka client (librdkafka 2.0.2) and its mock cluster
    libnghttp2-dev   # HTTP/2 framing and HPACK
    libssl-dev       # OpenSSL headers, for a complete native toolchain
    pkg-config       # how SwiftPM finds the two libraries above
    kcat             # Kafka CLI, used by tests and the demo docs
    nghttp2-client   # h2load: the reference HTTP/2 client for benchmarks
    nghttp2-server   # nghttpd: the reference HTTP/2 server for benchmarks
    openssl          # test certificates
)

missing=()
for package in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$package")
    fi
done
python_ok=1
python3 -c "import jsonschema, referencing, rfc3339_validator" 2>/dev/null || python_ok=0
if [[ $python_ok -eq 0 ]]; then
    # The record schemas in schemas/ are checked by the tests with Python's jsonschema (PyPI).
    echo "Installing Python package jsonschema (record schema checks)"
    python3 -m pip install --quiet jsonschema rfc3339-validator
fi
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
