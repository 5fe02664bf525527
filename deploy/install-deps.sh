#!/usr/bin/env bash
# Installs what surge needs to run locally on Debian, and only what is missing:
# Redis (server + redis-cli), RabbitMQ, MariaDB, foreman (runs the Procfile), curl,
# Chromium (headless, for the checkout page's browser tests in test/browser), HAProxy (the load
# balancer of deploy/fleet.sh) and promtool (Debian ships it in the prometheus package; make
# test-alerts runs deploy/alerts_test.yml with it; on a machine with systemd the package also
# enables a Prometheus server on :9090), iptables and setpriv (make test-faults cuts one program's
# links to an engine with iptables rules matching the uid setpriv runs it as).
# Go is not installed here: the script only checks that it is present and new enough.
#
#   deploy/install-deps.sh           what `make up` and the tests need
#   deploy/install-deps.sh buildah   only buildah, which `make image` builds with where no
#                                    Docker engine answers
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

log() { printf 'install-deps: %s\n' "$*" >&2; }

# have PROGRAM succeeds when PROGRAM is on PATH or in the sbin directories Debian uses.
have() { command -v "$1" >/dev/null 2>&1 || [[ -x "/usr/sbin/$1" || -x "/sbin/$1" ]]; }

# Each line: a program surge runs, and the Debian package that provides it.
needed="redis-server redis-server
redis-cli redis-tools
rabbitmq-server rabbitmq-server
rabbitmqctl rabbitmq-server
mariadbd mariadb-server
mariadb mariadb-client
foreman ruby-foreman
curl curl
chromium chromium
promtool prometheus
haproxy haproxy
iptables iptables
setpriv util-linux"

if [[ "${1:-}" == buildah ]]; then needed="buildah buildah"; fi

missing=()
while read -r program package; do
	if have "$program"; then continue; fi
	[[ " ${missing[*]} " == *" $package "* ]] || missing+=("$package")
done <<<"$needed"

if ((${#missing[@]} == 0)); then
	log "$(awk '{print $1}' <<<"$needed" | sort -u | paste -sd' ') already installed"
else
	command -v apt-get >/dev/null || {
		log "error: missing ${missing[*]} and apt-get is not available; install them by hand"
		exit 1
	}
	sudo=()
	if ((EUID != 0)); then
		command -v sudo >/dev/null || {
			log "error: missing ${missing[*]}; run as root or install sudo"
			exit 1
		}
		sudo=(sudo)
	fi
	log "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	"${sudo[@]}" apt-get update -qq
	"${sudo[@]}" apt-get install -y -qq -o Dpkg::Use-Pty=0 --no-install-recommends "${missing[@]}"
fi

[[ "${1:-}" != buildah ]] || exit 0

want="$(sed -n 's/^go \([0-9.]*\).*/\1/p' "$REPO_ROOT/go.mod")"
if ! command -v go >/dev/null; then
	log "error: Go is not installed (surge needs go $want or newer; see https://go.dev/dl/)"
	exit 1
fi
have_go="$(go env GOVERSION)"
have_go="${have_go#go}"
if [[ "$(printf '%s\n%s\n' "$want" "$have_go" | sort -V | head -n 1)" != "$want" ]]; then
	log "warning: $(go version) is older than go $want from go.mod; the go command will try to fetch a newer toolchain"
else
	log "using $(go version)"
fi
