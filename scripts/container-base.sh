#!/usr/bin/env bash
# Make a local stand-in for the Dockerfile's base image where Docker Hub is out of reach, from
# Debian's own mirror: debootstrap's minbase (what debian:*-slim is built from), slimmed the way the
# official image is (no docs, man pages or locales; apt lists empty), imported into ENGINE.
#   scripts/container-base.sh podman     # prints the image's name: localhost/debian:12.N-slim
# Build with it: podman build --build-arg BASE="$(scripts/container-base.sh podman)" -t toolbridge .
# Needs root and debootstrap; the root file system is cached in .cache/container-base/ (git-ignored),
# so only the first run downloads (about 2 minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
ENGINE=${1:?usage: scripts/container-base.sh podman|docker}
SUITE=bookworm
MIRROR=http://deb.debian.org
CACHE=.cache/container-base
ROOTFS=$CACHE/rootfs

if [ ! -f "$CACHE/rootfs.tar" ]; then
  rm -rf "$ROOTFS"
  mkdir -p "$CACHE"
  debootstrap --variant=minbase "$SUITE" "$ROOTFS" "$MIRROR/debian" >"$CACHE/debootstrap.log" 2>&1 \
    || { tail -20 "$CACHE/debootstrap.log" >&2; exit 1; }
  # As debian:*-slim: dpkg leaves out documentation (copyright files stay), and the same goes now.
  cat >"$ROOTFS/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/overrides/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/man/*
EOF
  find "$ROOTFS/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
  find "$ROOTFS/usr/share/doc" -mindepth 1 -type d -empty -delete
  rm -rf "$ROOTFS"/usr/share/{info,linda,lintian/overrides,locale,man}/* \
    "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/cache/apt/*.bin "$ROOTFS"/var/lib/apt/lists/* \
    "$ROOTFS"/var/log/*.log
  # As the official image's apt: downloaded packages are deleted once installed, no translations.
  cat >"$ROOTFS/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
  echo 'Acquire::Languages "none";' >"$ROOTFS/etc/apt/apt.conf.d/docker-no-languages"
  # The official image's sources: the release, its updates and its security fixes.
  rm -f "$ROOTFS/etc/apt/sources.list"
  cat >"$ROOTFS/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $MIRROR/debian
Suites: $SUITE $SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $MIRROR/debian-security
Suites: $SUITE-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  tar --numeric-owner -C "$ROOTFS" -cf "$CACHE/rootfs.tar.part" .
  mv "$CACHE/rootfs.tar.part" "$CACHE/rootfs.tar"
  rm -rf "$ROOTFS"
  tar -xOf "$CACHE/rootfs.tar" ./etc/debian_version >"$CACHE/debian_version"
fi

IMAGE="localhost/debian:$(cat "$CACHE/debian_version")-slim"
if ! "$ENGINE" image inspect "$IMAGE" >/dev/null 2>&1; then
  "$ENGINE" import --change 'CMD ["bash"]' "$CACHE/rootfs.tar" "$IMAGE" >/dev/null
fi
echo "$IMAGE"
