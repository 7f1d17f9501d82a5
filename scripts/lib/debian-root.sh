# Minimal Debian 12 root file systems made with debootstrap, and commands run inside them. Sourced by
# scripts/check-image.sh (the container image's runtime stage) and scripts/check-fresh.sh (the README's two
# commands on a fresh machine); not run by itself. Everything here needs root.

# The apt mirror debootstrap downloads from: the one this machine's apt uses for Debian 12, else deb.debian.org.
debian_root_mirror() {
    local uri
    uri=$(grep -hs -A3 '^URIs:' /etc/apt/sources.list.d/*.sources \
        | awk '/^URIs:/ { uri = $2 } /^Suites:.*bookworm( |$)/ && uri ~ /\/debian$/ { print uri; exit }')
    echo "${DEBIAN_MIRROR:-${uri:-http://deb.debian.org/debian}}"
}

# debian_root_require_root NAME: stops with a clear message unless run as root.
debian_root_require_root() {
    if [ "$(id -u)" != 0 ]; then
        echo "$1: needs root (debootstrap, mount and chroot)" >&2
        exit 1
    fi
}

# debian_root_bootstrap ROOT: `debootstrap --variant=minbase bookworm` into ROOT (what debian:bookworm-slim is
# built from), unless ROOT already holds one. Installs debootstrap on this machine first when it is missing.
debian_root_bootstrap() {
    local root=$1 mirror
    [ -x "$root/usr/bin/apt-get" ] && return 0
    command -v debootstrap >/dev/null || { apt-get update -q && apt-get install -y -q debootstrap; }
    mirror=$(debian_root_mirror)
    rm -rf "$root"
    mkdir -p "$(dirname "$root")"
    echo "   debootstrap --variant=minbase bookworm from $mirror"
    if ! debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.debootstrap.log" 2>&1; then
        tail -20 "$root.debootstrap.log" >&2
        rm -rf "$root"
        echo "debootstrap failed (log above, full log in $root.debootstrap.log)" >&2
        return 1
    fi
}

# debian_root_run ROOT [chroot options] COMMAND...: runs COMMAND chrooted into ROOT, in private mount and PID
# namespaces. /proc and /dev are mounted for it and vanish with the namespace, so nothing stays mounted on this
# machine when COMMAND ends, fails or is killed; every process COMMAND started ends with it (the PID namespace's
# first process is COMMAND, and unshare kills it when unshare itself is killed, e.g. by `timeout`).
# Optional, in the environment:
#   DEBIAN_ROOT_LOWER=DIR DEBIAN_ROOT_CHANGES=DIR  ROOT is an overlay: DIR read-only below, the changes in
#                                                  DEBIAN_ROOT_CHANGES (a fresh one starts from DIR unchanged);
#   DEBIAN_ROOT_BIND_RO="PATH..."                  host directories bound read-only at the same path in ROOT;
#   DEBIAN_ROOT_NETWORK=private                    a network namespace of its own: its own loopback (ports
#                                                  such as the demo's 2197 and 9464 collide with nothing on this
#                                                  machine) and outgoing connections through slirp4netns (user-
#                                                  mode NAT and DNS; installed here when missing).
debian_root_run() {
    if [ "${DEBIAN_ROOT_NETWORK:-host}" != private ]; then
        unshare --mount --pid --fork --kill-child --propagation private -- \
            /bin/bash -c "$debian_root_inner" debian_root_run "$@"
        return
    fi
    command -v slirp4netns >/dev/null || { apt-get update -q && apt-get install -y -q slirp4netns; } >&2
    local status=0 namespace_pid='' slirp_pid
    # An explicit <&0: a background command's input would otherwise be /dev/null.
    unshare --net --mount --pid --fork --kill-child --propagation private -- \
        /bin/bash -c "$debian_root_inner" debian_root_run "$@" <&0 &
    local unshare_pid=$!
    for _ in $(seq 100); do
        namespace_pid=$(pgrep -P "$unshare_pid" | head -1) && [ -n "$namespace_pid" ] && break
        sleep 0.1
    done
    slirp4netns --configure --mtu=65520 --disable-host-loopback "$namespace_pid" tap0 >/dev/null 2>&1 &
    slirp_pid=$!
    wait "$unshare_pid" || status=$?
    kill "$slirp_pid" 2>/dev/null || true
    wait "$slirp_pid" 2>/dev/null || true
    return "$status"
}

# What runs in the new namespaces before chroot (with this machine's tools): the mounts, the network, then
# COMMAND. Arguments: ROOT [chroot options] COMMAND...
# shellcheck disable=SC2016 # expanded by the inner shell
debian_root_inner='
    set -e
    root=$1; shift
    if [ -n "${DEBIAN_ROOT_LOWER:-}" ]; then
        mkdir -p "$DEBIAN_ROOT_CHANGES/upper" "$DEBIAN_ROOT_CHANGES/work" "$root"
        mount -t overlay overlay \
            -o "lowerdir=$DEBIAN_ROOT_LOWER,upperdir=$DEBIAN_ROOT_CHANGES/upper,workdir=$DEBIAN_ROOT_CHANGES/work" \
            "$root"
    fi
    mount -t proc proc "$root/proc"
    mount --rbind /dev "$root/dev"
    for path in ${DEBIAN_ROOT_BIND_RO:-}; do
        mkdir -p "$root$path"
        mount --bind "$path" "$root$path"
        mount -o remount,bind,ro "$root$path"
    done
    if [ "${DEBIAN_ROOT_NETWORK:-host}" = private ]; then
        ip link set lo up
        # slirp4netns configures tap0 once it has attached to this namespace.
        for _ in $(seq 100); do ip -4 -o address show dev tap0 2>/dev/null | grep -q inet && break; sleep 0.1; done
        ip -4 -o address show dev tap0 | grep -q inet || { echo "debian_root_run: no network (slirp4netns)" >&2; exit 1; }
        echo "nameserver 10.0.2.3" >"$root/etc/resolv.conf"   # slirp4netns forwards it to this machine'"'"'s resolver
    else
        cp /etc/resolv.conf "$root/etc/resolv.conf"
    fi
    options=()   # chroot reads its options before the new root only
    while [ "${1#--}" != "${1:-}" ]; do options+=("$1"); shift; done
    exec chroot "${options[@]}" "$root" "$@"
'
