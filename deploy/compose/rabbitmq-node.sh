#!/usr/bin/env bash
# Starts docker-compose.yml's RabbitMQ in the rabbitmq image: the service users and their
# permissions (deploy/users.sh definitions, from the password secrets) are written where
# rabbitmq.conf's load_definitions reads them at boot, then the image's entrypoint runs the
# broker. No default user is used by any service.
set -euo pipefail

defs=/var/lib/rabbitmq/surge-definitions.json
umask 077
"$(dirname "${BASH_SOURCE[0]}")/../users.sh" definitions >"$defs.tmp"
mv -f "$defs.tmp" "$defs"
chown rabbitmq:rabbitmq "$defs" 2>/dev/null || true
exec docker-entrypoint.sh rabbitmq-server
