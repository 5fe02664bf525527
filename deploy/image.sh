#!/usr/bin/env bash
# Builds surge's OCI image (make image): the four service binaries, static, into bin/, the CA
# certificates beside the Containerfile, then the image with `docker build` when a Docker
# engine answers, with `buildah build` otherwise (installed from Debian's packages when
# missing). Needs no network besides that install: the image starts FROM scratch.
#
# Environment:
#   SURGE_IMAGE          image name                                (surge)
#   SURGE_IMAGE_BUILDER  docker or buildah, instead of choosing    (unset)
#   SURGE_CA_BUNDLE      CA certificates copied into the image     (/etc/ssl/certs/ca-certificates.crt)
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
IMAGE="${SURGE_IMAGE:-surge}"
CA_BUNDLE="${SURGE_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
# The services the image holds (make build's list less the load generator), and the probe
# its health checks run (no shell, no curl in a scratch image).
BINS=(gateway worker reconciler opsctl healthcheck)

log() { printf 'image: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

cd "$REPO_ROOT"

mkdir -p bin
for name in "${BINS[@]}"; do
	pkg="./services/$name"
	[[ "$name" != healthcheck ]] || pkg=./deploy/healthcheck
	log "CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o bin/$name $pkg"
	CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "bin/$name" "$pkg"
	# A binary built with cgo would need a libc that a scratch image does not have.
	go version -m "bin/$name" | grep -q 'CGO_ENABLED=0' || die "bin/$name is not static"
done

[[ -s "$CA_BUNDLE" ]] || die "no CA certificates at $CA_BUNDLE (Debian package ca-certificates, or set SURGE_CA_BUNDLE)"
install -m 0644 "$CA_BUNDLE" deploy/image/ca-certificates.crt

version="$(git describe --tags --always --dirty 2>/dev/null || echo dev)"
revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
args=(-f Containerfile -t "$IMAGE" --build-arg "VERSION=$version" --build-arg "REVISION=$revision" .)

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
