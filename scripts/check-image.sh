#!/usr/bin/env bash
# The container image's two stages, reproduced without a container runtime (docs/deployment.md, "Checking
# the image without Docker"):
#
#   build stage    this machine is Debian 12 with Swift 6.3, as swift:6.3-bookworm: the Dockerfile's
#                  `swift build ... --static-swift-stdlib` runs here as written;
#   runtime stage  debootstrap makes a minimal Debian 12 root file system (what debian:bookworm-slim is),
#                  the Dockerfile's runtime packages are installed into it with apt-get, and the binary and
#                  the configuration files are copied where the Dockerfile puts them.
#
# Then, inside that root (chroot, as the image's user 10001), it runs the Dockerfile's own check (no
# missing shared library, `pushbridge --help`), `pushbridge validate` on the shipped configuration, and
# `pushbridge demo`: embedded Kafka, the APNs simulator over TLS + HTTP/2 and the bridge, which exits 0 only
# when every event is accounted for. Needs root and network access to the Debian mirror; the root file system
# is cached in $IMAGE_ROOT (default .build-image/rootfs) and reused. The root machinery is shared with
# scripts/check-fresh.sh in scripts/lib/debian-root.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/debian-root.sh
. scripts/lib/debian-root.sh

DOCKERFILE=deploy/Dockerfile
IMAGE_ROOT=${IMAGE_ROOT:-.build-image/rootfs}
SWIFT=${SWIFT:-swift}

debian_root_require_root check-image

# The runtime packages, read from the Dockerfile's runtime stage so that this check follows it.
runtime_packages=$(
    sed -n '/^FROM .* AS runtime/,$p' "$DOCKERFILE" \
        | grep -o 'apt-get install -y -q --no-install-recommends [^&]*' \
        | sed -e 's/apt-get install -y -q --no-install-recommends//' -e 's/\\//g'
)
if [ -z "${runtime_packages// /}" ]; then
    echo "check-image: no runtime packages found in $DOCKERFILE" >&2
    exit 1
fi

echo "== build stage: swift build -c release --product pushbridge --static-swift-stdlib"
# Its own build directory: a static build does not share objects with .build's dynamic one.
scratch=${IMAGE_BUILD:-.build-image/build}
$SWIFT build -c release --product pushbridge --static-swift-stdlib --scratch-path "$scratch"
binary="$($SWIFT build -c release --scratch-path "$scratch" --show-bin-path)/pushbridge"

echo "== runtime stage: Debian 12 minbase in $IMAGE_ROOT, packages:$runtime_packages"
debian_root_bootstrap "$IMAGE_ROOT"
run_in_root() { debian_root_run "$IMAGE_ROOT" "$@"; }

# shellcheck disable=SC2086 # the package list is split on purpose
run_in_root /bin/bash -c "
    set -euo pipefail
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    apt-get install -y -q --no-install-recommends $runtime_packages >/dev/null
    getent group pushbridge >/dev/null || groupadd --system --gid 10001 pushbridge
    getent passwd pushbridge >/dev/null || useradd --system --uid 10001 --gid pushbridge --home-dir /app \
        --no-create-home --shell /usr/sbin/nologin pushbridge
"

# COPY --from=build /out/ / and the COPY lines of the runtime stage.
install -D -m 0755 "$binary" "$IMAGE_ROOT/usr/local/bin/pushbridge"
strip --strip-debug "$IMAGE_ROOT/usr/local/bin/pushbridge"
sed -n '/^FROM .* AS runtime/,$p' "$DOCKERFILE" | grep '^COPY config/' | while read -r _ source target; do
    install -D -m 0644 "$source" "$IMAGE_ROOT$target"
done

# The image's environment (ENV lines of the runtime stage), for the commands below.
mapfile -t environment < <(sed -n '/^FROM .* AS runtime/,$p' "$DOCKERFILE" | sed -n 's/^ENV //p')

echo "== the Dockerfile's check: no missing shared library, pushbridge --help"
run_in_root --userspec=10001:10001 /bin/bash -c "
    set -euo pipefail
    if ldd /usr/local/bin/pushbridge | grep 'not found'; then exit 1; fi
    pushbridge --help >/dev/null
"
echo "   size of the binary: $(du -h "$IMAGE_ROOT/usr/local/bin/pushbridge" | cut -f1);" \
    "of the root without apt's lists and cache: $(du -sh --exclude=var/lib/apt/lists --exclude=var/cache/apt \
        "$IMAGE_ROOT" | cut -f1)"

echo "== pushbridge validate on the shipped configuration (its secrets and key files are not here: only the"
echo "   structure is checked, so the expected errors are the missing key files)"
# shellcheck disable=SC2016 # expanded inside the root
run_in_root --userspec=10001:10001 /usr/bin/env "${environment[@]}" /bin/bash -c '
    cd /app && pushbridge validate --config "$PUSHBRIDGE_CONFIG" || true
' | sed 's/^/   /'

echo "== pushbridge demo as user 10001 in /app (embedded Kafka, APNs simulator, the bridge)"
run_in_root --userspec=10001:10001 /usr/bin/env "${environment[@]}" /bin/bash -c '
    cd /app && pushbridge demo --events 200
' | sed 's/^/   /'
echo "check-image: the runtime stage runs the demo to completion"
