#!/usr/bin/env bash
# make check-fresh: the README's two commands on a fresh Debian 12 machine with only Swift installed, as a new
# user meets them (docs/deployment.md, "Checking the README on a fresh machine").
#
#   starting point  a minimal Debian 12 root (debootstrap --variant=minbase, scripts/lib/debian-root.sh) with
#                   the packages the Swift toolchain needs to run (toolchain_prerequisites below), the toolchain
#                   of this machine copied to /opt/swift and on PATH, and the two things the README's
#                   commands assume besides Swift (user_prerequisites: make, and sudo for a user who is not
#                   root). Cached in $FRESH_DIR/base, rebuilt when this machine's `swift --version` changes.
#   each run        starts from that base unchanged (an overlay: the run's changes go to $FRESH_DIR/run and are
#                   deleted afterwards), adds the user `newuser` (sudo without password, like an admin account
#                   on a new machine) and a clean copy of the current commit (`git archive HEAD`, so what is
#                   not committed is not checked) in /home/newuser/pushbridge, then, as that user:
#                     make run                    installs the Debian packages (scripts/install-deps.sh, through
#                                                 sudo), builds, runs the demo; it must exit 0
#                     make test                   the whole suite (or FRESH_TEST="make …" for a subset)
#
# Swift packages resolve through this machine's package mirror: the `url.<dir>.insteadOf` rules of its git
# configuration (here https://github.com/ is served from /opt/swift-packages) are copied into the root's
# /etc/gitconfig and their directories bound read-only into it. A real fresh machine resolves from GitHub.
#
# Needs root, and network access to the Debian mirror and to PyPI (the test suite's Python tools). The user's
# commands run in a network namespace of their own (slirp4netns gives it outgoing connections), so the fixed
# loopback ports of the demo and the tests (2197, 9464) collide with nothing on this machine. Every step has a time
# limit (FRESH_*_TIMEOUT); mounts live in a private mount namespace and vanish when a step ends, fails or is killed.
set -euo pipefail
self=$(readlink -f "$0")
cd "$(dirname "$self")/.."
# shellcheck source=scripts/lib/debian-root.sh
. scripts/lib/debian-root.sh

FRESH_DIR=${FRESH_DIR:-.build-fresh}
FRESH_TEST=${FRESH_TEST:-make test}
FRESH_SETUP_TIMEOUT=${FRESH_SETUP_TIMEOUT:-30m}   # debootstrap, the prerequisites, copying the toolchain
FRESH_RUN_TIMEOUT=${FRESH_RUN_TIMEOUT:-60m}       # make run: apt-get, package resolution, first build, demo
FRESH_TEST_TIMEOUT=${FRESH_TEST_TIMEOUT:-75m}     # make test: the test build, the suite, fuzz-smoke
FRESH_USER=newuser

# What the Swift toolchain itself needs on Debian 12 (from swift.org's instructions for Debian 12: the linker, the
# C runtime and headers clang compiles against, git for package resolution, the libraries swift, lldb and
# Foundation load), installed without recommended packages so that nothing the project needs arrives by chance.
toolchain_prerequisites=(
    binutils-gold libicu-dev libcurl4-openssl-dev libedit-dev libsqlite3-dev libncurses-dev libpython3-dev
    libxml2-dev pkg-config uuid-dev tzdata git gcc
)
# What the README's commands assume besides Swift: they are make targets, and a user who is not root installs
# the Debian packages through sudo.
user_prerequisites=(make sudo)

debian_root_require_root check-fresh
swift_bin=$(dirname "$(readlink -f "$(command -v swift)")")
toolchain=$(dirname "$(dirname "$swift_bin")")   # <toolchain>/usr/bin/swift
swift_version=$(swift --version 2>/dev/null | head -1)
[ -x "$toolchain/usr/bin/swift" ] || { echo "check-fresh: no Swift toolchain found from $(command -v swift)" >&2; exit 1; }

base=$FRESH_DIR/base
changes=$FRESH_DIR/run
root=$FRESH_DIR/root
logs=$FRESH_DIR/logs

elapsed() { local seconds=$((SECONDS - $1)); printf '%dm%02ds' $((seconds / 60)) $((seconds % 60)); }

# step NAME TIMEOUT FUNCTION [ARGUMENT]: runs FUNCTION of this script (in a new invocation of it, so that
# `timeout` can end it) with a time limit, its output in $logs/NAME.log; shows the end of the log when it fails.
step() {
    local name=$1 limit=$2 started=$SECONDS status=0
    shift 2
    echo "== $name"
    timeout --kill-after=30s "$limit" "$self" --step "$@" >"$logs/$name.log" 2>&1 || status=$?
    if [ "$status" != 0 ]; then
        [ "$status" = 124 ] && echo "   timed out after $limit" >&2
        tail -40 "$logs/$name.log" | sed 's/^/   | /' >&2
        echo "   $name: FAILED (exit $status) after $(elapsed "$started"); full log: $logs/$name.log" >&2
        exit 1
    fi
    echo "   done in $(elapsed "$started")"
}

# The git configuration that makes Swift packages resolve from this machine's mirror: its url.*.insteadOf
# rules whose replacement is a local directory (NAME VALUE lines), and those directories.
mirror_rules=$(git config --system --get-regexp '^url\..*\.insteadof$' 2>/dev/null || true)
mirror_rules+=$'\n'$(git config --global --get-regexp '^url\..*\.insteadof$' 2>/dev/null || true)
mirror_dirs=$(awk 'NF { sub(/^url\./, "", $1); sub(/\.insteadof$/, "", $1); if ($1 ~ /^\//) print $1 }' \
    <<<"$mirror_rules" | sort -u | tr '\n' ' ')

make_base() {
    set -euo pipefail
    debian_root_bootstrap "$base.tmp"
    DEBIAN_ROOT_LOWER='' debian_root_run "$base.tmp" /bin/bash -c "
        set -euo pipefail
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -q
        apt-get install -y -q --no-install-recommends ${toolchain_prerequisites[*]} ${user_prerequisites[*]}
        apt-get clean
        rm -rf /var/lib/apt/lists/*
        echo 'export PATH=/opt/swift/usr/bin:\$PATH' >/etc/profile.d/swift.sh
    "
    echo "copying the toolchain $toolchain ($swift_version) to /opt/swift"
    mkdir -p "$base.tmp/opt/swift"
    cp -a "$toolchain/." "$base.tmp/opt/swift/"
    echo "$swift_version" >"$base.tmp/opt/swift/.check-fresh-version"
    rm -rf "$base" && mv "$base.tmp" "$base"
}

in_run() {
    DEBIAN_ROOT_LOWER=$PWD/$base DEBIAN_ROOT_CHANGES=$PWD/$changes DEBIAN_ROOT_BIND_RO=$mirror_dirs \
        debian_root_run "$PWD/$root" "$@"
}

# as_user COMMAND: a login shell of the new user in its checkout, with only what a login gives it, on a network
# of its own (a private loopback, outgoing connections through user-mode NAT).
as_user() {
    DEBIAN_ROOT_NETWORK=private in_run /usr/sbin/runuser --login "$FRESH_USER" -c "cd ~/pushbridge && $1"
}

prepare_run() {
    set -euo pipefail
    # The machine's package mirror, for every user of the root (git's system configuration).
    local name value
    while read -r name value; do
        [ -n "$name" ] || continue
        in_run git config --system --add "${name%.insteadof}.insteadOf" "$value"
    done <<<"$mirror_rules"
    # Its repositories belong to this machine's root; git lets another user clone a local repository only when
    # it is marked safe (git 2.39.5, CVE-2024-32004).
    local repositories
    # shellcheck disable=SC2086 # the directories are split on purpose
    mapfile -t repositories < <(find $mirror_dirs -mindepth 1 -maxdepth 3 -type d -name '*.git' -prune \
        -exec readlink -f {} \;)
    # shellcheck disable=SC2016 # expanded inside the root
    in_run /bin/bash -c 'for path in "$@"; do git config --system --add safe.directory "$path"; done' \
        safe "${repositories[@]}"
    # This machine's network reaches PyPI through a TLS-intercepting egress proxy: its root certificates (the local
    # ones, which update-ca-certificates adds to the system store once install-deps installs ca-certificates) and
    # pip's setting to trust the system store go into the root too. A real fresh machine needs neither.
    if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
        mkdir -p "$changes/upper/usr/local/share/ca-certificates"
        cp /usr/local/share/ca-certificates/*.crt "$changes/upper/usr/local/share/ca-certificates/"
    fi
    if [ -f /etc/pip.conf ]; then
        grep -E '^\[global\]|^cert *=' /etc/pip.conf >"$changes/upper/etc/pip.conf"
    fi
    in_run /bin/bash -c "
        set -euo pipefail
        useradd --create-home --shell /bin/bash $FRESH_USER
        echo '$FRESH_USER ALL=(ALL) NOPASSWD: ALL' >/etc/sudoers.d/$FRESH_USER
        chmod 0440 /etc/sudoers.d/$FRESH_USER
        echo 127.0.0.1 localhost \$(cat /etc/hostname 2>/dev/null || true) >/etc/hosts
    "
    git archive --format=tar --prefix=pushbridge/ HEAD \
        | in_run /usr/sbin/runuser "$FRESH_USER" -c 'tar -x -C ~'
    in_run /usr/sbin/runuser --login "$FRESH_USER" -c 'swift --version && git config --get-regexp "^url\."'
}


if [ "${1:-}" = --step ]; then
    shift
    "$@"
    exit
fi

mkdir -p "$logs"
cleanup() {
    local status=$?
    [ -n "${FRESH_KEEP:-}" ] || rm -rf "$changes"
    [ "$status" = 0 ] || echo "check-fresh: FAILED (exit $status); logs in $logs" >&2
}
trap cleanup EXIT
trap 'exit 130' INT TERM

started=$SECONDS
echo "check-fresh: commit $(git rev-parse --short HEAD) in a fresh Debian 12 root; Swift from $toolchain"
if [ "$(cat "$base/opt/swift/.check-fresh-version" 2>/dev/null)" != "$swift_version" ]; then
    rm -rf "$base.tmp"
    step base "$FRESH_SETUP_TIMEOUT" make_base
else
    echo "== base: cached in $base (Debian 12 minbase, toolchain prerequisites, $swift_version)"
fi
rm -rf "$changes"
step prepare 5m prepare_run
step make-run "$FRESH_RUN_TIMEOUT" as_user "make run"
grep -A12 '^  result' "$logs/make-run.log" | sed 's/^/   /'
step make-test "$FRESH_TEST_TIMEOUT" as_user "$FRESH_TEST"
grep -E '^(✔|✘|􁁛|􀢄)? *Test run with|Executed [0-9]+ tests' "$logs/make-test.log" | tail -3 | sed 's/^/   /' || true
echo "check-fresh: passed in $(elapsed "$started") (make run, then $FRESH_TEST, as $FRESH_USER on Debian 12 with only Swift)"
