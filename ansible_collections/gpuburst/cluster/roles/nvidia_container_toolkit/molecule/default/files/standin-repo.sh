#!/bin/sh
# A local stand-in for NVIDIA's container toolkit repository (unreachable from the test machine):
# the same flat layout (stable/deb/<arch>/ with "/" as suite), signed by a throw-away key, holding
# the four packages at two versions so that the role's pin is visible. The packages are empty
# stand-ins: nvidia-container-runtime only hands over to runc.
set -eu
root=/srv/nvidia
repo=$root/stable/deb/amd64
mkdir -p "$repo" /tmp/standin
export GNUPGHOME=/root/.gnupg-standin
mkdir -p -m 0700 "$GNUPGHOME"
gpg --batch --passphrase '' --quick-gen-key 'gpuburst molecule stand-in <molecule@localhost>' ed25519 sign never 2>/dev/null
gpg --armor --export > "$root/gpgkey"
for version in 1.17.8-1 1.18.0-1; do
  for pkg in nvidia-container-toolkit nvidia-container-toolkit-base libnvidia-container-tools libnvidia-container1; do
    d=/tmp/standin/$pkg-$version
    mkdir -p "$d/DEBIAN" "$d/usr/share/doc/$pkg"
    case $pkg in
      nvidia-container-toolkit) deps="Depends: nvidia-container-toolkit-base (= $version), libnvidia-container-tools (= $version)"
        mkdir -p "$d/usr/bin"
        printf '#!/bin/sh\n# molecule stand-in for nvidia-container-runtime %s\nexec runc "$@"\n' "$version" > "$d/usr/bin/nvidia-container-runtime"
        chmod 0755 "$d/usr/bin/nvidia-container-runtime" ;;
      libnvidia-container-tools) deps="Depends: libnvidia-container1 (= $version)" ;;
      *) deps="" ;;
    esac
    echo "stand-in $pkg $version" > "$d/usr/share/doc/$pkg/README"
    {
      echo "Package: $pkg"; echo "Version: $version"; echo "Architecture: amd64"
      echo "Maintainer: gpuburst molecule <molecule@localhost>"
      [ -n "$deps" ] && echo "$deps"
      echo "Description: molecule stand-in for NVIDIA's $pkg"
    } > "$d/DEBIAN/control"
    dpkg-deb --build --root-owner-group "$d" "$repo/${pkg}_${version}_amd64.deb" >/dev/null
  done
done
cd "$repo"
apt-ftparchive packages . > Packages
apt-ftparchive release . > Release
gpg --batch --yes --clearsign -o InRelease Release
gpg --batch --yes -abs -o Release.gpg Release
