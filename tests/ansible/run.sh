#!/usr/bin/env bash
# The Ansible collection's checks: ansible-lint (production profile), ansible-galaxy collection build,
# and the molecule scenarios (podman, Debian 12 image built here). `make ansible-test` / `make test`
# run this with .venv/bin on PATH. Exits non-zero on the first failure.
#   tests/ansible/run.sh                 everything
#   tests/ansible/run.sh lint|build|molecule [role...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
collection=$repo/ansible_collections/gpuburst/cluster
export CONTAINERS_CONF=${CONTAINERS_CONF:-$here/containers.conf}
export ANSIBLE_COLLECTIONS_PATH=$repo
export ANSIBLE_FORCE_COLOR=0 PY_COLORS=0 ANSIBLE_NOCOLOR=1
export GPUBURST_MOLECULE_IMAGE=${GPUBURST_MOLECULE_IMAGE:-localhost/gpuburst-molecule-debian12:2}
ROLES_WITH_SCENARIOS=(metrics_certs mig_layout nvidia_container_toolkit nvidia_driver)
what=${1:-all}
[ $# -gt 0 ] && shift

for tool in ansible-playbook ansible-lint ansible-galaxy molecule; do
  command -v "$tool" >/dev/null || { echo "run.sh: $tool not on PATH (run through 'make ansible-test')" >&2; exit 2; }
done

# The containerd drop-in is written as TOML on the controller (gpuburst.cluster's filter plugin).
python3 -c 'import tomli_w' 2>/dev/null || { echo "run.sh: the controller needs tomli-w (pip install tomli-w)" >&2; exit 2; }

step() { printf '\n== %s (%ss)\n' "$1" "$SECONDS"; }

lint() {
  step "ansible-lint --profile production"
  (cd "$repo" && ansible-lint --profile production --offline ansible_collections/gpuburst/cluster roles inventories)
}

build() {
  step "ansible-galaxy collection build"
  local out
  out=$(mktemp -d)
  ansible-galaxy collection build "$collection" --output-path "$out"
  ls "$out"
  rm -rf "$out"
}

ensure_podman() {
  if ! command -v podman >/dev/null || ! command -v debootstrap >/dev/null || ! command -v runc >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      step "installing podman runc debootstrap"
      DEBIAN_FRONTEND=noninteractive apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        podman runc debootstrap uidmap slirp4netns fuse-overlayfs >/dev/null
    else
      echo "run.sh: podman, runc and debootstrap are needed for the molecule scenarios (apt-get install as root)" >&2
      exit 2
    fi
  fi
  step "molecule image"
  "$here/build-image.sh"
}

scenarios() {
  ensure_podman
  local roles=("$@") logs pids=() failed=()
  [ ${#roles[@]} -gt 0 ] || roles=("${ROLES_WITH_SCENARIOS[@]}")
  logs=${MOLECULE_LOG_DIR:-$(mktemp -d /tmp/gpuburst-molecule.XXXXXX)}
  mkdir -p "$logs"
  # The scenarios wait on podman exec far more than they compute: run them side by side.
  for role in "${roles[@]}"; do
    step "molecule test: $role (log: $logs/$role.log)"
    (cd "$collection/roles/$role" && exec molecule test) >"$logs/$role.log" 2>&1 &
    pids+=($!)
  done
  for i in "${!roles[@]}"; do
    if wait "${pids[$i]}"; then
      step "molecule test: ${roles[$i]} passed"
    else
      failed+=("${roles[$i]}")
      step "molecule test: ${roles[$i]} FAILED; its log follows"
      sed 's/\x1b\[[0-9;]*m//g' "$logs/${roles[$i]}.log" | tail -n 150
    fi
  done
  if [ ${#failed[@]} -gt 0 ]; then
    echo "run.sh: molecule scenarios failed: ${failed[*]} (logs in $logs)" >&2
    return 1
  fi
}

case $what in
  lint) lint ;;
  build) build ;;
  molecule) scenarios "$@" ;;
  all) lint; build; scenarios ;;
  *) echo "usage: $0 [all|lint|build|molecule [role...]]" >&2; exit 2 ;;
esac
step "done"
