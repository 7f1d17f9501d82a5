#!/usr/bin/env bash
# Installs the project's Python tools (scripts/python-requirements.txt, pinned) into .build-lint/venv, once:
# later runs install nothing and print nothing until the requirements change. Used by `make test` (before the
# Swift tests, which use jsonschema and Tansu from there) and by scripts/lint-deploy.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.build-lint/venv
requirements=scripts/python-requirements.txt
stamp="$venv/.installed-$(sha256sum "$requirements" | cut -c1-16)"

if [[ ! -f "$stamp" ]]; then
    echo "Installing the project's Python tools into $venv (linters, jsonschema, the Tansu broker)"
    rm -rf "$venv"
    if ! python3 -m venv "$venv" >/dev/null; then
        echo "error: python3 -m venv failed; on Debian install python3-venv (apt-get install python3-venv)" >&2
        exit 1
    fi
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --requirement "$requirements"
    touch "$stamp"
fi
