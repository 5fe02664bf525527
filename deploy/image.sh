#!/usr/bin/env bash
# Builds surge's OCI image (make image): the four service binaries, static and for Linux
# whatever the build host (GOOS=linux, CGO_ENABLED=0), into bin/, the CA certificates beside
# the Containerfile, then the image for linux/GOARCH with `docker build` when a Docker engine
# answers, with `buildah build` otherwise (installed from Debian's packages when missing).
# Needs no network besides that install: the image starts FROM scratch.
#
#   deploy/image.sh              the binaries, then the image
#   deploy/image.sh binaries     the binaries only (deploy/check tests the cross build)
#
# Environment:
#   SURGE_IMAGE          image name                                (surge)
#   SURGE_IMAGE_BUILDER  docker or buildah, instead of choosing    (unset)
#   SURGE_CA_BUNDLE      CA certificates copied into the image     (/etc/ssl/certs/ca-certificates.crt)
#   GOARCH               the image's architecture: amd64, arm64... (amd64, whatever the host's)
#   SURGE_IMAGE_BIN_DIR  where the binaries go                     (bin; the image copies bin/)
#   SURGE_IMAGE_BINS     which binaries, space-separated           (all five)
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
IMAGE="${SURGE_IMAGE:-surge}"
CA_BUNDLE="${SURGE_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
# The services the image holds (make build's list less the load generator), and the probe
# its health checks run (no shell, no curl in a scratch image).
BINS=(gateway worker reconciler opsctl healthcheck)
if [[ -n "${SURGE_IMAGE_BINS:-}" ]]; then read -r -a BINS <<<"$SURGE_IMAGE_BINS"; fi
# A Linux image from any build host: a binary built for the host's OS (a Mac's Mach-O) or
# with cgo (dynamic, wanting a libc) cannot start in it.
export GOOS=linux GOARCH="${GOARCH:-amd64}" CGO_ENABLED=0
BIN_DIR="${SURGE_IMAGE_BIN_DIR:-bin}"

log() { printf 'image: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

cd "$REPO_ROOT"

mkdir -p "$BIN_DIR"
for name in "${BINS[@]}"; do
	pkg="./services/$name"
	[[ "$name" != healthcheck ]] || pkg=./deploy/healthcheck
	log "GOOS=$GOOS GOARCH=$GOARCH CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o $BIN_DIR/$name $pkg"
	go build -trimpath -ldflags="-s -w" -o "$BIN_DIR/$name" "$pkg"
	info="$(go version -m "$BIN_DIR/$name")"
	for want in CGO_ENABLED=0 GOOS=linux "GOARCH=$GOARCH"; do
		grep -q "[[:space:]]$want\$" <<<"$info" || die "$BIN_DIR/$name was not built with $want"
	done
done
[[ "${1:-}" != binaries ]] || exit 0
[[ "$BIN_DIR" == bin ]] || die "the image copies bin/: unset SURGE_IMAGE_BIN_DIR"

[[ -s "$CA_BUNDLE" ]] || die "no CA certificates at $CA_BUNDLE (Debian package ca-certificates, or set SURGE_CA_BUNDLE)"
install -m 0644 "$CA_BUNDLE" deploy/image/ca-certificates.crt

version="$(git describe --tags --always --dirty 2>/dev/null || echo dev)"
revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
args=(-f Containerfile -t "$IMAGE" --platform "linux/$GOARCH" --build-arg "VERSION=$version" --build-arg "REVISION=$revision" .)

builder="${SURGE_IMAGE_BUILDER:-}"
if [[ -z "$builder" ]]; then
	if command -v docker >/dev/null && docker info >/dev/null 2>&1; then builder=docker; else builder=buildah; fi
fi
case "$builder" in
docker)
	log "docker build ${args[*]}"
	docker build "${args[@]}"
	size="$(docker image inspect --format '{{.Size}}' "$IMAGE")"
	;;
buildah)
	command -v buildah >/dev/null || "$REPO_ROOT/deploy/install-deps.sh" buildah
	old="$(buildah images --noheading --format '{{.ID}}' "$IMAGE" 2>/dev/null || true)"
	log "buildah build ${args[*]}"
	buildah build --quiet "${args[@]}" >/dev/null
	new="$(buildah images --noheading --format '{{.ID}}' "$IMAGE")"
	# The previous build, now untagged, is dropped rather than left to pile up.
	if [[ -n "$old" && "$old" != "$new" ]]; then buildah rmi "$old" >/dev/null 2>&1 || true; fi
	size="$(buildah images --noheading --format '{{.Size}}' "$IMAGE")"
	;;
*) die "SURGE_IMAGE_BUILDER=$builder: want docker or buildah" ;;
esac
if [[ "$size" =~ ^[0-9]+$ ]]; then size="$((size / 1000000)) MB"; fi
log "built $IMAGE ($version, $size) with $builder"
