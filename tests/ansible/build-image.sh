#!/usr/bin/env bash
# Build the Debian 12 image the molecule scenarios run in: debootstrap minbase + systemd as PID 1 and,
# like a cloud VM, a kernel (the nvidia_driver scenario checks the initramfs it rebuilds), imported
# into podman. Skips the work when the image exists. Needs root (debootstrap).
# Bump the tag when the content changes, so that machines with the old image rebuild it.
set -euo pipefail
IMAGE=${GPUBURST_MOLECULE_IMAGE:-localhost/gpuburst-molecule-debian12:2}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
here=$(cd "$(dirname "$0")" && pwd)
export CONTAINERS_CONF=${CONTAINERS_CONF:-$here/containers.conf}

if podman image exists "$IMAGE"; then
  echo "image $IMAGE exists"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "build-image.sh: building $IMAGE needs root (debootstrap); run it once as root, or make test as root" >&2
  exit 2
fi
root=$(mktemp -d /var/tmp/gpuburst-rootfs.XXXXXX)
trap 'rm -rf "$root"' EXIT
echo "debootstrap bookworm into $root (about 2 minutes)"
debootstrap --variant=minbase \
  --include=python3,python3-apt,ca-certificates,systemd,systemd-sysv,dbus,procps,gnupg,linux-image-cloud-amd64 \
  bookworm "$root" "$MIRROR" >"$root.log" 2>&1 || { tail -20 "$root.log"; exit 1; }
rm -f "$root.log"
# Like a Debian cloud image: only the main component. The nvidia_driver role adds what it needs.
cat >"$root/etc/apt/sources.list" <<SOURCES
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
SOURCES
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
tar -C "$root" -c . | podman import \
  --change 'CMD ["/sbin/init"]' --change 'STOPSIGNAL=SIGRTMIN+3' - "$IMAGE" >/dev/null
echo "built $IMAGE"
