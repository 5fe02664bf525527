#!/usr/bin/env bash
# docker-compose.yml's Redis Cluster, created on the first start and repaired on every later
# one (the service runs at each `docker compose up`):
#   - no node knows a cluster: create it (3 masters, 3 replicas);
#   - otherwise the nodes kept their nodes.conf in their volumes but, after `down`/`up`, may
#     have new addresses that nodes.conf does not hold: every node meets every other at its
#     current address (CLUSTER MEET updates a known node's address), a node that lost its
#     volume joins again as a replica, and the ids no node holds any more are forgotten.
# It ends when every node reports cluster_state:ok and knows all the others.
#
# SURGE_REDIS_NODES  node hosts   (redis-1 ... redis-6)   SURGE_REDIS_PORT  their port (6379)
# SURGE_REDIS_PASSWORD_FILE  the administrator's (default user's) password
set -euo pipefail

read -r -a NODES <<<"${SURGE_REDIS_NODES:-redis-1 redis-2 redis-3 redis-4 redis-5 redis-6}"
PORT="${SURGE_REDIS_PORT:-6379}"
REDISCLI_AUTH="$(<"${SURGE_REDIS_PASSWORD_FILE:?}")"
export REDISCLI_AUTH

log() { printf 'redis-cluster-init: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
cli() {
	local host=$1
	shift
	timeout 10 redis-cli -h "$host" -p "$PORT" --no-auth-warning "$@" | tr -d '\r'
}
info() { cli "$1" CLUSTER INFO | sed -n "s/^$2://p"; }

declare -A IP
for n in "${NODES[@]}"; do
	for _ in $(seq 60); do
		[[ "$(cli "$n" PING 2>/dev/null)" == PONG ]] && break
		sleep 1
	done
	[[ "$(cli "$n" PING 2>/dev/null)" == PONG ]] || die "node $n does not answer"
	# CLUSTER MEET and --cluster create want addresses, not names.
	if [[ "$n" =~ ^[0-9.]+$ ]]; then IP[$n]=$n; else IP[$n]="$(getent hosts "$n" | awk '{print $1; exit}' || true)"; fi
	[[ -n "${IP[$n]}" ]] || die "cannot resolve $n"
done

fresh=() known=()
for n in "${NODES[@]}"; do
	if [[ "$(info "$n" cluster_known_nodes)" == 1 && "$(info "$n" cluster_slots_assigned)" == 0 ]]; then
		fresh+=("$n")
	else
		known+=("$n")
	fi
done

# wait_ok NODE... waits until each NODE reports cluster_state:ok and WANT known nodes.
wait_ok() {
	local n
	for _ in $(seq 90); do
		for n in "$@"; do
			[[ "$(info "$n" cluster_state)" == ok && "$(info "$n" cluster_known_nodes)" -ge "$WANT" ]] || continue 2
		done
		return 0
	done
	die "the cluster is not ok after 90 s: $(for n in "$@"; do printf '%s=%s ' "$n" "$(info "$n" cluster_state)"; done)"
}

if ((${#known[@]} == 0)); then
	log "creating the cluster on ${NODES[*]}"
	addrs=()
	for n in "${NODES[@]}"; do addrs+=("${IP[$n]}:$PORT"); done
	redis-cli --no-auth-warning --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes
	WANT=${#NODES[@]} wait_ok "${NODES[@]}"
	log "cluster created"
	exit 0
fi

log "repairing: ${known[*]} know the cluster${fresh:+, ${fresh[*]} lost their state}"
for a in "${known[@]}"; do
	for b in "${known[@]}"; do
		[[ "$a" == "$b" ]] || cli "$a" CLUSTER MEET "${IP[$b]}" "$PORT" >/dev/null
	done
done
WANT=${#known[@]} wait_ok "${known[@]}"

for n in "${fresh[@]}"; do
	log "$n joins as a replica"
	redis-cli --no-auth-warning --cluster add-node "${IP[$n]}:$PORT" "${IP[${known[0]}]}:$PORT" --cluster-slave
done

# Forget the ids that belong to no node any more (a node that lost its volume got a new one).
ids=" "
for n in "${NODES[@]}"; do ids+="$(cli "$n" CLUSTER MYID) "; done
while read -r id _ flags _; do
	[[ -n "$id" && "$ids" != *" $id "* ]] || continue
	log "forgetting $id ($flags)"
	for n in "${NODES[@]}"; do cli "$n" CLUSTER FORGET "$id" >/dev/null || true; done
done < <(cli "${known[0]}" CLUSTER NODES)

WANT=${#NODES[@]} wait_ok "${NODES[@]}"
log "cluster ok on ${NODES[*]}"
