#!/usr/bin/env bash
# A Debian bookworm base image made from Debian's packages with debootstrap, for machines that
# reach Debian's archive but no container registry (docs/deploy.md, "Without a registry"). The
# images build over it with BUILD_IMAGE / RUNTIME_IMAGE / BASE_IMAGE set to its tag. Kept when it
# exists already; needs root (debootstrap) and a running Docker daemon.
#
#   scripts/make-base-image.sh [TAG]        # TAG: vidclf-base:bookworm
set -euo pipefail

TAG="${1:-vidclf-base:bookworm}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# Debian's docker.io client (docker-compose 1.29 talks to the same daemon).
DOCKER="${DOCKER:-/usr/bin/docker}"

if "$DOCKER" image inspect "$TAG" >/dev/null 2>&1; then
  echo "make-base-image: $TAG exists"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "make-base-image: debootstrap needs root: sudo $0 $*" >&2
  exit 1
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "make-base-image: debootstrap bookworm from $MIRROR into $TAG (about a minute)"
if ! debootstrap --variant=minbase bookworm "$work/rootfs" "$MIRROR" >"$work/debootstrap.log" 2>&1
then
  tail -20 "$work/debootstrap.log" >&2
  echo "make-base-image: debootstrap failed" >&2
  exit 1
fi
tar -C "$work/rootfs" -c . | "$DOCKER" import - "$TAG" >/dev/null
echo "make-base-image: $TAG made"
