#!/usr/bin/env bash
# Starts one Redis Cluster node of docker-compose.yml, in the redis image: writes its
# configuration and ACL file (deploy/users.sh acl-file, from the password secrets) into its
# volume, then hands over to the image's entrypoint, which runs redis-server as user redis.
# Settings match deploy/redis-cluster.sh: AOF everysec, no RDB snapshots, noeviction,
# cluster-node-timeout 5000. Nodes announce their compose hostname to clients
# (cluster-preferred-endpoint-type hostname), so redirects stay valid when the containers get
# new addresses; the bus addresses are repaired by redis-cluster-init.sh.
set -euo pipefail

data="${SURGE_REDIS_DATA:-/data}"
admin="$(<"${SURGE_REDIS_PASSWORD_FILE:?}")"
umask 077
"$(dirname "${BASH_SOURCE[0]}")/../users.sh" acl-file >"$data/users.acl.tmp"
mv -f "$data/users.acl.tmp" "$data/users.acl"
cat >"$data/redis.conf" <<CONF
# Written by deploy/compose/redis-node.sh at each start.
port ${SURGE_REDIS_PORT:-6379}
dir $data
cluster-enabled yes
cluster-config-file nodes.conf
cluster-node-timeout 5000
cluster-announce-hostname $HOSTNAME
cluster-preferred-endpoint-type hostname
appendonly yes
appendfsync everysec
save ""
maxmemory ${SURGE_REDIS_MAXMEMORY:-256mb}
maxmemory-policy noeviction
masterauth "$admin"
aclfile $data/users.acl
CONF
exec "${SURGE_REDIS_EXEC:-docker-entrypoint.sh}" redis-server "$data/redis.conf"
