#!/usr/bin/env bash
# make release: cross-builds agent, coordinator and coordctl as static
# binaries (CGO_ENABLED=0) for each platform of PLATFORMS, stamped with
# VERSION and COMMIT (internal/version), and packs one tarball per platform,
# phalanx-VERSION-OS-ARCH.tar.gz, holding bin/, the README, the licence when
# the repository has one, and the systemd units and environment files
# (deploy/systemd), beside SHA256SUMS (sha256sum -c SHA256SUMS checks
# them), in OUT. Tarballs are reproducible: sorted names, root-owned,
# mtime of the commit (SOURCE_DATE_EPOCH).
set -euo pipefail
cd "$(dirname "$0")/.."

: "${VERSION:?VERSION is required (make release sets it)}"
: "${COMMIT:?COMMIT is required (make release sets it)}"
OUT=${OUT:-dist}
PLATFORMS=${PLATFORMS:-linux/amd64 linux/arm64}
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
pkg=github.com/phalanxload/phalanx/internal/version
ldflags="-X $pkg.Version=$VERSION -X $pkg.Commit=$COMMIT"

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
tarballs=()
for platform in $PLATFORMS; do
  os=${platform%/*}
  arch=${platform#*/}
  name=phalanx-$VERSION-$os-$arch
  dir=$stage/$name
  mkdir -p "$dir/bin" "$dir/systemd"
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -ldflags "$ldflags" \
    -o "$dir/bin/" ./cmd/agent ./cmd/coordinator ./cmd/coordctl
  cp README.md "$dir/"
  if [ -f LICENSE ]; then cp LICENSE "$dir/"; fi
  cp deploy/systemd/*.service deploy/systemd/*.env "$dir/systemd/"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
    -C "$stage" -cf - "$name" | gzip -n >"$OUT/$name.tar.gz"
  tarballs+=("$name.tar.gz")
  echo "$OUT/$name.tar.gz"
done
(cd "$OUT" && sha256sum "${tarballs[@]}" >SHA256SUMS)
echo "$OUT/SHA256SUMS"
