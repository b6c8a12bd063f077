#!/usr/bin/env bash
# Build scaler/Dockerfile with podman and smoke-test the image as it will run in a cluster:
# read-only root filesystem, its own non-root user, no capabilities, no network.
#   --help; `simulate` on a small trace; `plan` on a kubectl snapshot; the user is not root.
# `make test` runs this. Where podman cannot run (no podman, or not root and no base image yet) it
# says so and exits 0, unless GPUBURST_REQUIRE_IMAGE=1 (what .ci/run sets): then it fails.
#
# The base: Docker Hub is unreachable here, so the Dockerfile's PYTHON_IMAGE build argument gets a
# Debian 12 minbase with python3 made by debootstrap and `podman import`ed (as
# tests/ansible/build-image.sh does for molecule). pip in the build stage trusts the system CA bundle
# (PIP_CERT in the Dockerfile's build stage); the host's bundle is mounted read-only over it for the
# build only, so PyPI is reached through this machine's TLS proxy and nothing of the host is left in the
# image (a mount over a file the base has leaves the base's file; the check below makes sure).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
export CONTAINERS_CONF=${CONTAINERS_CONF:-$repo/tests/ansible/containers.conf}
BASE=${GPUBURST_IMAGE_BASE:-localhost/gpuburst-python-base:bookworm-1}
IMAGE=${GPUBURST_IMAGE:-localhost/gpuburst-scaler:test}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
CA_BUNDLE=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
UID_EXPECTED=65532  # gpuburst_platform.render.NON_ROOT_UID: the pods run as this user too

skip() {
  if [ "${GPUBURST_REQUIRE_IMAGE:-0}" = 1 ]; then
    echo "image: FAILED: $1 (GPUBURST_REQUIRE_IMAGE=1)" >&2
    exit 1
  fi
  echo "image: SKIPPED: $1; the image was not built or tested here (CI runs it: .ci/run as root)"
  exit 0
}
step() { printf '== image: %s (%ss)\n' "$1" "$SECONDS"; }

command -v podman >/dev/null || skip "podman is not installed (apt-get install podman runc uidmap slirp4netns fuse-overlayfs)"
podman info >/dev/null 2>&1 || skip "podman cannot run here ($(podman info 2>&1 | tail -1))"

if ! podman image exists "$BASE"; then
  [ "$(id -u)" = 0 ] || skip "building the base $BASE needs root (debootstrap)"
  command -v debootstrap >/dev/null || skip "debootstrap is not installed"
  root=$(mktemp -d /var/tmp/gpuburst-pybase.XXXXXX)
  trap 'rm -rf "$root" "$root.log"' EXIT
  step "debootstrap bookworm minbase with python3 into $root (about 1.5 minutes)"
  debootstrap --variant=minbase --include=python3,python3-venv,python-is-python3,ca-certificates \
    bookworm "$root" "$MIRROR" >"$root.log" 2>&1 || { tail -20 "$root.log"; exit 1; }
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  tar -C "$root" -c . | podman import -q --change 'CMD ["python3"]' - "$BASE" >/dev/null
  rm -rf "$root" "$root.log"
  trap - EXIT
  step "built base $BASE"
fi

[ -r "$CA_BUNDLE" ] || skip "no CA bundle at $CA_BUNDLE for pip in the build"
work=$(mktemp -d /tmp/gpuburst-image.XXXXXX)
trap 'rm -rf "$work"' EXIT

step "podman build -f scaler/Dockerfile --build-arg PYTHON_IMAGE=$BASE -t $IMAGE"
podman build --network host --layers=false \
  --build-arg "PYTHON_IMAGE=$BASE" \
  -v "$CA_BUNDLE:/etc/ssl/certs/ca-certificates.crt:ro" \
  -f "$repo/scaler/Dockerfile" -t "$IMAGE" "$repo" >"$work/build.log" 2>&1 \
  || { tail -40 "$work/build.log"; exit 1; }

# How every smoke run goes: read-only root, no network, no capabilities, nothing may be gained.
run() {
  podman run --rm --read-only --network none --cap-drop ALL --security-opt no-new-privileges \
    -v "$work/data:/data:ro" "$@"
}
mkdir -p "$work/data"
# A small trace: the packaged sample's header (and comments) plus its first 40 jobs.
grep '^#' "$repo/scaler/sim/data/philly-sample.csv" >"$work/data/trace.csv"
# (awk reads the whole file: `grep | head` can die of SIGPIPE under pipefail when head stops reading first)
awk '!/^#/ && n++ < 41' "$repo/scaler/sim/data/philly-sample.csv" >>"$work/data/trace.csv"
cp "$repo/examples/pools-aws.yaml" "$repo/examples/snapshot-aws.json" "$repo/scaler/requirements.lock" \
  "$here/locked_set.py" "$work/data/"

fail() { echo "image: FAILED: $1" >&2; shift; [ $# -eq 0 ] || printf '%s\n' "$@" | tail -30 >&2; exit 1; }

step "smoke: the image's user"
user=$(podman image inspect --format '{{.Config.User}}' "$IMAGE")
[ "${user%%:*}" = "$UID_EXPECTED" ] || fail "the image's USER is '$user', expected $UID_EXPECTED"
ids=$(run --entrypoint python "$IMAGE" -c 'import os; print(os.getuid(), os.getgid())')
[ "$ids" = "$UID_EXPECTED $UID_EXPECTED" ] || fail "the process runs as uid/gid '$ids', expected $UID_EXPECTED"
# Nothing of the build is left behind: no pip cache or config, the base's own CA bundle.
leftover=$(run --entrypoint python "$IMAGE" -c \
  'import os; print(" ".join(p for p in ("/etc/pip.conf", "/root/.cache/pip") if os.path.exists(p)))')
[ -z "$leftover" ] || fail "build-time files left in the image: $leftover"
bundle() { podman run --rm --entrypoint sha256sum "$1" /etc/ssl/certs/ca-certificates.crt; }
[ "$(bundle "$IMAGE")" = "$(bundle "$BASE")" ] || fail "the image's CA bundle is not its base's (the host's leaked in?)"

step "smoke: exactly the locked dependency set"
out=$(run --entrypoint python "$IMAGE" /data/locked_set.py /data/requirements.lock 2>&1) \
  || fail "the image's packages are not scaler/requirements.lock's" "$out"
echo "$out"

step "smoke: --help (read-only, as uid $UID_EXPECTED)"
out=$(run "$IMAGE" --help 2>&1) || fail "--help exited non-zero" "$out"
for cmd in run plan simulate; do
  grep -q "$cmd" <<<"$out" || fail "--help does not list '$cmd'" "$out"
done

step "smoke: simulate a 40-job trace"
out=$(run "$IMAGE" simulate --trace /data/trace.csv --pools /data/pools-aws.yaml --quiet 2>&1) \
  || fail "simulate exited non-zero" "$out"
grep -Eq "^ *jobs_completed +40$" <<<"$out" && grep -Eq "^ *jobs_total +40$" <<<"$out" \
  || fail "simulate did not complete the 40 jobs" "$out"

step "smoke: plan on examples/snapshot-aws.json"
out=$(run "$IMAGE" plan --snapshot /data/snapshot-aws.json --pools /data/pools-aws.yaml --json 2>&1) \
  || fail "plan exited non-zero" "$out"
python3 - "$out" <<'PY' || fail "plan did not print a JSON plan" "$out"
import json, sys
plan = json.loads(sys.argv[1])
assert isinstance(plan, dict) and plan, plan
PY

# The release builds linux/arm64 too (under QEMU, on GitHub): the same lock must have a wheel for every
# package there, or that build would fail. pip resolves it for aarch64 without installing anything.
pip=${VENV_PIP:-$repo/.venv/bin/pip}
if [ -x "$pip" ]; then
  step "the lock resolves to wheels on linux/arm64 too"
  platforms=()
  for tag in manylinux2014_aarch64 manylinux_2_17_aarch64 manylinux_2_28_aarch64 manylinux_2_34_aarch64; do
    platforms+=(--platform "$tag")
  done
  out=$("$pip" install --dry-run --ignore-installed --only-binary=:all: "${platforms[@]}" --python-version 3.11 \
    --implementation cp --target "$work/arm64" --require-hashes --no-deps -r "$repo/scaler/requirements.lock" 2>&1) \
    || fail "scaler/requirements.lock does not install on linux/arm64" "$out"
fi

size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
step "passed: $IMAGE ($((size / 1000000)) MB) runs read-only as uid $UID_EXPECTED: --help, simulate, plan"
