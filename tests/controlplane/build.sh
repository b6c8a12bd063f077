#!/usr/bin/env bash
# Builds the real control plane the tests run (etcd, kube-apiserver, kube-scheduler,
# kube-controller-manager) from upstream's Go modules at the versions go.mod pins, into
# .cache/kube/bin (or $GPUBURST_KUBE_BIN). Reuses the binaries while go.mod and go.sum are unchanged.
# The first build on a fresh 2-core machine downloads ~0.5 GB of modules and compiles for several
# minutes (README says how long); Go's build cache (GOCACHE) and module cache (GOMODCACHE) keep
# later builds short.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${GPUBURST_KUBE_BIN:-$root/.cache/kube/bin}"
stamp="$bin/.built-from"
want="$(cat "$here/go.mod" "$here/go.sum" "$here/build.sh" | sha256sum | cut -d' ' -f1)"
tools=(kube-apiserver kube-scheduler kube-controller-manager etcd)
all_built() { for t in "${tools[@]}"; do [ -x "$bin/$t" ] || return 1; done; }
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && all_built; then
  echo "control plane binaries up to date in $bin"
  exit 0
fi
command -v go >/dev/null || [ ! -x /usr/local/go/bin/go ] || export PATH="$PATH:/usr/local/go/bin"  # Go's own install path
command -v go >/dev/null || { echo "build.sh: go not found (Go 1.26 is needed to build the control plane)" >&2; exit 1; }
mkdir -p "$bin"
start=$SECONDS
cd "$here"
# -mod=readonly: go.sum must already hold every module (a build never rewrites our go.mod).
# -trimpath and no debug info: smaller binaries, nothing of this machine's paths in them.
# The version the binaries report (/version, the components' --version) is stamped in by the linker, as
# upstream's hack/lib/version.sh does; features and API defaults follow the code's own 1.37.
kv="$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print $3}' go.mod)"
pkg=k8s.io/component-base/version
ldflags="-s -w -X $pkg.gitVersion=$kv -X $pkg.gitMajor=1 -X $pkg.gitMinor=$(echo "$kv" | cut -d. -f2)"
ldflags="$ldflags -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
GOFLAGS="-mod=readonly -buildvcs=false" go build -trimpath -ldflags="$ldflags" -o "$bin/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler \
  k8s.io/kubernetes/cmd/kube-controller-manager go.etcd.io/etcd/server/v3
mv "$bin/server" "$bin/etcd"
echo "$want" > "$stamp"
echo "control plane built in $((SECONDS - start)) s into $bin"
