#!/usr/bin/env bash
# A fleet of surge hosts on one machine: each host is a Linux network namespace on one bridge,
# with its own processes, logs and data under var/fleet/<host>/.
#
#   deploy/fleet.sh up       create the hosts and start everything (idempotent: `down` first)
#   deploy/fleet.sh down     stop every fleet process, delete the namespaces, the links and
#                            the bridge; data and logs under var/fleet/ are removed on the next up
#   deploy/fleet.sh status   hosts, their processes, the Redis Cluster, RabbitMQ, HAProxy
#   deploy/fleet.sh env      the SURGE_ variables a client of the fleet uses (tests read it)
#
# Faults, for test/fleet (HOST is h1..h3, gw1, gw2, wk1, wk2, db, lb):
#   cut HOST | heal HOST     take the host's link down / up (its processes keep running)
#   lose HOST                the host is gone: link down, then every process of it killed
#   revive HOST              link up, and a lost gateway or worker host's service started again
#   kill-rabbit HOST         SIGKILL the host's RabbitMQ node; start-rabbit HOST restarts it
#   rabbit-leader QUEUE [ASK] the host whose node leads the quorum queue QUEUE, asked of ASK's
#                            node (a host), or of the first node that answers
#   rabbit-unacked HOST      deliveries the broker has handed to HOST's channels, not yet acked
#   rabbit-consumers HOST    consumers the broker holds for HOST's channels, on every queue
#   rabbit-running [ASK]     the hosts whose RabbitMQ node the cluster lists running, asked of
#                            ASK's node, or of the first node that answers
#   lb-status HOST           HAProxy's state of the gateway HOST in the backend the orders go to
#                            while a gateway is ready, and its last check's status (DOWN L4TOUT)
#   addr HOST                the host's address
#   wait-healthy             wait until every host answers: Redis Cluster ok on each master with
#                            three replicas linked (and each host's :7000 its master again),
#                            three RabbitMQ nodes, both gateways UP in HAProxy
#   exec HOST CMD...         run CMD in HOST with the fleet's SURGE_ variables
#
# The subnet 10.213.7.0/24 exists only on the bridge surge-br0: no host has a default route,
# nothing is forwarded off the machine. The root namespace holds 10.213.7.1 (checks and
# opsctl) and the buyers' addresses 10.213.7.101-104.
#
#   host       address      runs
#   surge-h1   10.213.7.11  Redis master :7000, replica :7001 of h3's master, RabbitMQ node
#   surge-h2   10.213.7.12  Redis master :7000, replica :7001 of h1's master, RabbitMQ node
#   surge-h3   10.213.7.13  Redis master :7000, replica :7001 of h2's master, RabbitMQ node
#   surge-gw1  10.213.7.21  gateway :8080          surge-wk1  10.213.7.31  worker
#   surge-gw2  10.213.7.22  gateway :8080          surge-wk2  10.213.7.32  worker
#   surge-db   10.213.7.41  MariaDB :3306          surge-lb   10.213.7.10  HAProxy :8080
#
# The binaries are `make build`'s (bin/), run in the namespaces with `ip netns exec`.
# Environment: SURGE_FLEET_DIR (state, <repo>/var/fleet), SURGE_FLEET_TIMEOUT (seconds, 120).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${SURGE_FLEET_DIR:-$REPO_ROOT/var/fleet}"
TIMEOUT="${SURGE_FLEET_TIMEOUT:-120}"
export PATH="$PATH:/usr/sbin:/sbin"

NET=10.213.7
BRIDGE=surge-br0
ROOT_ADDR=$NET.1
CLIENT_ADDRS="$NET.101 $NET.102 $NET.103 $NET.104"
declare -A ADDR=([h1]=$NET.11 [h2]=$NET.12 [h3]=$NET.13 [gw1]=$NET.21 [gw2]=$NET.22
	[wk1]=$NET.31 [wk2]=$NET.32 [db]=$NET.41 [lb]=$NET.10)
HOSTS="h1 h2 h3 gw1 gw2 wk1 wk2 db lb"
DATA_HOSTS="h1 h2 h3"
REDIS_PASSWORD=surge
MYSQL_USER=surge
MYSQL_PASSWORD=surge
# The gateways' admin listeners are on the bridge, off loopback: a gateway refuses the default
# token there. The fleet's own, for its tests only (nothing outside this machine reaches it).
FLEET_ADMIN_TOKEN=fleet-admin-token-for-tests
RABBIT_BIN=/usr/lib/rabbitmq/bin
[[ -x $RABBIT_BIN/rabbitmq-server ]] || RABBIT_BIN="$(dirname "$(command -v rabbitmq-server)")"

log() { printf 'fleet: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

ns() { echo "surge-$1"; }
in_ns() {
	local h=$1
	shift
	ip netns exec "$(ns "$h")" "$@"
}

# wait_for WHAT CMD... polls CMD until it succeeds or the timeout passes.
wait_for() {
	local what=$1 deadline=$((SECONDS + TIMEOUT))
	shift
	until "$@" >/dev/null 2>&1; do
		((SECONDS < deadline)) || die "timed out waiting for $what"
		sleep 0.5
	done
}

redis_amqp_mysql_env() {
	local first=${1:-h1} order urls=""
	case $first in
	h2) order="h2 h3 h1" ;;
	h3) order="h3 h1 h2" ;;
	*) order="h1 h2 h3" ;;
	esac
	for h in $order; do urls+="${urls:+,}amqp://guest:guest@${ADDR[$h]}:5672/"; done
	echo "SURGE_REDIS_ADDRS=${ADDR[h1]}:7000,${ADDR[h2]}:7000,${ADDR[h3]}:7000,${ADDR[h1]}:7001,${ADDR[h2]}:7001,${ADDR[h3]}:7001"
	echo "SURGE_REDIS_PASSWORD=$REDIS_PASSWORD"
	echo "SURGE_AMQP_URL=$urls"
	echo "SURGE_MYSQL_DSN=$MYSQL_USER:$MYSQL_PASSWORD@tcp(${ADDR[db]}:3306)/surge"
}

cmd_env() {
	redis_amqp_mysql_env h1
	echo "SURGE_FLEET_URL=http://${ADDR[lb]}:8080"
	echo "SURGE_FLEET_ADMIN_URLS=http://${ADDR[gw1]}:8081,http://${ADDR[gw2]}:8081"
	echo "SURGE_FLEET_ADMIN_TOKEN=$FLEET_ADMIN_TOKEN"
	echo "SURGE_FLEET_DIR=$DIR"
	echo "SURGE_FLEET_CLIENT_ADDRS=${CLIENT_ADDRS// /,}"
	echo "SURGE_RECONCILE_GRACE=3s"
}

# ---- network ---------------------------------------------------------------------------------

net_up() {
	ip link add "$BRIDGE" type bridge
	ip link set "$BRIDGE" up
	ip addr add "$ROOT_ADDR/24" dev "$BRIDGE"
	for a in $CLIENT_ADDRS; do ip addr add "$a/32" dev "$BRIDGE"; done
	for h in $HOSTS; do
		ip netns add "$(ns "$h")"
		ip link add "$(ns "$h")" type veth peer name eth0 netns "$(ns "$h")"
		ip link set "$(ns "$h")" master "$BRIDGE" up
		in_ns "$h" ip link set lo up
		in_ns "$h" ip addr add "${ADDR[$h]}/24" dev eth0
		in_ns "$h" ip link set eth0 up
	done
}

# ---- Redis Cluster ---------------------------------------------------------------------------

redis_cli() { redis-cli --no-auth-warning -a "$REDIS_PASSWORD" "$@"; }

start_redis() {
	local h=$1 port=$2 d="$DIR/$1/redis-$2"
	mkdir -p "$d"
	cat >"$d/redis.conf" <<EOF
bind ${ADDR[$h]}
port $port
dir $d
daemonize yes
pidfile $d/redis.pid
logfile $d/redis.log
cluster-enabled yes
cluster-config-file nodes.conf
cluster-node-timeout 3000
cluster-announce-ip ${ADDR[$h]}
cluster-replica-validity-factor 0
cluster-allow-reads-when-down no
requirepass $REDIS_PASSWORD
masterauth $REDIS_PASSWORD
appendonly no
save ""
maxmemory 128mb
maxmemory-policy noeviction
EOF
	in_ns "$h" redis-server "$d/redis.conf"
}

redis_id() { redis_cli -h "$1" -p "$2" cluster myid; }

# redis_ok ARGS... succeeds when the command answers OK (redis-cli exits 0 on error replies).
redis_ok() { [[ $(redis_cli "$@" 2>&1) == OK ]]; }

cluster_ok() { redis_cli -h "${ADDR[h1]}" -p 7000 cluster info | grep -q '^cluster_state:ok'; }
replicas_linked() {
	local n
	n=$(redis_cli -h "${ADDR[h1]}" -p 7000 cluster nodes | grep -cE '[ ,]slave ' || true)
	[[ $n == 3 ]] || return 1
	for h in $DATA_HOSTS; do
		redis_cli -h "${ADDR[$h]}" -p 7001 info replication | grep -q 'master_link_status:up' || return 1
	done
}

redis_up() {
	for h in $DATA_HOSTS; do
		start_redis "$h" 7000
		start_redis "$h" 7001
	done
	for h in $DATA_HOSTS; do wait_for "redis on $h" redis_cli -h "${ADDR[$h]}" -p 7001 ping; done
	redis-cli --no-auth-warning -a "$REDIS_PASSWORD" --cluster create \
		"${ADDR[h1]}:7000" "${ADDR[h2]}:7000" "${ADDR[h3]}:7000" --cluster-yes >"$DIR/redis-create.log"
	# Each host's replica follows the previous host's master: losing one host loses one
	# master and one replica of different shards.
	local -A master_of=([h1]=h3 [h2]=h1 [h3]=h2)
	for h in $DATA_HOSTS; do
		redis_cli -h "${ADDR[$h]}" -p 7001 cluster meet "${ADDR[h1]}" 7000 >/dev/null
	done
	for h in $DATA_HOSTS; do
		local m=${master_of[$h]} id
		id=$(redis_id "${ADDR[$m]}" 7000)
		wait_for "replica on $h to learn its master" redis_ok -h "${ADDR[$h]}" -p 7001 cluster replicate "$id"
	done
	wait_for "the Redis Cluster" cluster_ok
	wait_for "the Redis replicas" replicas_linked
	log "Redis Cluster up: 3 masters, 3 replicas on 3 hosts"
}

# ---- RabbitMQ --------------------------------------------------------------------------------

rabbit_node() { echo "rabbit@${ADDR[$1]}"; }

rabbit_env() {
	local h=$1 d="$DIR/$1/rabbitmq" ip=${ADDR[$1]}
	echo HOME="$DIR/rabbit-home"
	echo RABBITMQ_USE_LONGNAME=true
	echo RABBITMQ_NODENAME="$(rabbit_node "$h")"
	echo RABBITMQ_NODE_IP_ADDRESS="$ip"
	echo RABBITMQ_NODE_PORT=5672
	echo RABBITMQ_DIST_PORT=25672
	echo RABBITMQ_CONF_ENV_FILE="$d/rabbitmq-env.conf"
	echo RABBITMQ_CONFIG_FILE="$d/rabbitmq"
	echo RABBITMQ_ENABLED_PLUGINS_FILE="$d/enabled_plugins"
	echo RABBITMQ_MNESIA_BASE="$d/mnesia"
	echo RABBITMQ_LOG_BASE="$d/log"
	echo RABBITMQ_PID_FILE="$d/pid"
	echo RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="+S 1:1 +sbwt none -kernel inet_dist_use_interface {${ip//./,}}"
	echo RABBITMQ_CTL_ERL_ARGS="+S 1:1"
	echo ERL_EPMD_ADDRESS="$ip"
}

rabbitmqctl_on() {
	local h=$1
	shift
	local -a env
	mapfile -t env < <(rabbit_env "$h")
	in_ns "$h" env "${env[@]}" "$RABBIT_BIN/rabbitmqctl" -n "$(rabbit_node "$h")" "$@"
}

start_rabbit() {
	local h=$1 d="$DIR/$1/rabbitmq"
	mkdir -p "$d/log"
	: >"$d/rabbitmq-env.conf"
	echo "[]." >"$d/enabled_plugins"
	cat >"$d/rabbitmq.conf" <<EOF
listeners.tcp.default = ${ADDR[$h]}:5672
loopback_users = none
vm_memory_high_watermark.absolute = 512MiB
disk_free_limit.absolute = 50MB
cluster_partition_handling = pause_minority
cluster_formation.peer_discovery_backend = classic_config
cluster_formation.classic_config.nodes.1 = $(rabbit_node h1)
cluster_formation.classic_config.nodes.2 = $(rabbit_node h2)
cluster_formation.classic_config.nodes.3 = $(rabbit_node h3)
log.console = false
log.file.level = info
EOF
	local -a env
	mapfile -t env < <(rabbit_env "$h")
	in_ns "$h" env "${env[@]}" setsid "$RABBIT_BIN/rabbitmq-server" >"$d/server.out" 2>&1 </dev/null &
}

rabbit_wait() {
	local h=$1
	rabbitmqctl_on "$h" wait "$DIR/$h/rabbitmq/pid" --timeout "$TIMEOUT" >/dev/null ||
		die "RabbitMQ on $h did not start: $(tail -n 5 "$DIR/$h/rabbitmq/server.out")"
}

rabbit_clustered() {
	[[ $(rabbitmqctl_on h1 -q eval 'length(rabbit_nodes:all_running()).' 2>/dev/null) == 3 ]]
}

rabbit_up() {
	mkdir -p "$DIR/rabbit-home"
	head -c 32 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' >"$DIR/rabbit-home/.erlang.cookie"
	chmod 400 "$DIR/rabbit-home/.erlang.cookie"
	# The first node forms the cluster; the others find it through classic_config and join.
	start_rabbit h1
	rabbit_wait h1
	start_rabbit h2
	start_rabbit h3
	rabbit_wait h2
	rabbit_wait h3
	wait_for "the RabbitMQ cluster of 3 nodes" rabbit_clustered
	log "RabbitMQ cluster up: $(rabbit_node h1) $(rabbit_node h2) $(rabbit_node h3)"
}

# ---- MariaDB ---------------------------------------------------------------------------------

mariadb_up() {
	local d="$DIR/db/mariadb"
	mkdir -p "$d"
	mariadb-install-db --no-defaults --datadir="$d/data" --user=root \
		--auth-root-authentication-method=normal --skip-test-db >"$d/install.log" 2>&1 ||
		die "mariadb-install-db: $(tail -n 5 "$d/install.log")"
	in_ns db setsid mariadbd --no-defaults --datadir="$d/data" --port=3306 --bind-address="${ADDR[db]}" \
		--socket="$d/mysqld.sock" --pid-file="$d/mysqld.pid" --user=root --skip-name-resolve \
		--innodb-buffer-pool-size=128M --max-connections=500 --innodb-flush-log-at-trx-commit=2 \
		--log-error="$d/error.log" </dev/null >/dev/null 2>&1 &
	wait_for "MariaDB" mariadb --no-defaults -S "$d/mysqld.sock" -u root -e 'SELECT 1'
	mariadb --no-defaults -S "$d/mysqld.sock" -u root <<EOF
CREATE DATABASE IF NOT EXISTS surge;
CREATE USER IF NOT EXISTS '$MYSQL_USER'@'$NET.%' IDENTIFIED BY '$MYSQL_PASSWORD';
GRANT ALL ON surge.* TO '$MYSQL_USER'@'$NET.%';
EOF
	log "MariaDB up on ${ADDR[db]}:3306"
}

# ---- surge's services and HAProxy ------------------------------------------------------------

# start_service HOST NAME FIRST_BROKER CMD... runs a bin/ program in HOST with the fleet's
# addresses, its output in var/fleet/HOST/NAME.log. The program runs under a supervisor, as
# a host's init system or Kubernetes would run it: one that exits with an error (an engine it
# could not reach at start) is started again after a second, and each such exit is written to
# the log, where wait_host finds it.
start_service() {
	local h=$1 name=$2 first=$3
	shift 3
	local -a env
	mapfile -t env < <(redis_amqp_mysql_env "$first")
	mkdir -p "$DIR/$h"
	in_ns "$h" env "${env[@]}" SURGE_LOG_LEVEL=info SURGE_PPROF_ADDR= \
		SURGE_TRUSTED_PROXIES="${ADDR[lb]}/32" SURGE_HTTP_ADDR="${ADDR[$h]}:8080" \
		SURGE_ADMIN_ADDR="${ADDR[$h]}:8081" SURGE_ADMIN_TOKEN="$FLEET_ADMIN_TOKEN" \
		SURGE_WORKER_METRICS_ADDR="${ADDR[$h]}:9101" SURGE_RECONCILE_METRICS_ADDR="${ADDR[$h]}:9102" \
		SURGE_RECONCILE_GRACE=3s SURGE_RECONCILE_EVERY=5s GOMAXPROCS=2 \
		setsid bash -c "$SUPERVISE" supervise "$@" >>"$DIR/$h/$name.log" 2>&1 </dev/null &
}

# shellcheck disable=SC2016 # expanded by the supervisor's shell
SUPERVISE='while :; do
	"$@"
	rc=$?
	((rc == 0)) && exit 0
	echo "fleet: ${1##*/} exited with status $rc; starting it again in 1s"
	sleep 1
done'

ready() { curl -fsS -m 2 "http://$1:8080/readyz"; }

# start_host HOST starts the surge service of a gateway, worker or database host; each
# gateway and worker dials its own RabbitMQ node first.
start_host() {
	case $1 in
	gw1) start_service gw1 gateway h1 "$REPO_ROOT/bin/gateway" ;;
	gw2) start_service gw2 gateway h2 "$REPO_ROOT/bin/gateway" ;;
	wk1) start_service wk1 worker h2 "$REPO_ROOT/bin/worker" ;;
	wk2) start_service wk2 worker h3 "$REPO_ROOT/bin/worker" ;;
	db) start_service db reconciler h3 "$REPO_ROOT/bin/reconciler" serve ;;
	*) die "$1 runs no surge service" ;;
	esac
}

# host_service HOST names the surge service the host runs.
host_service() {
	case $1 in
	gw*) echo gateway ;;
	wk*) echo worker ;;
	db) echo reconciler ;;
	esac
}

# wait_host HOST [FROM_LINE] waits until the host's service answers; it reports the exits
# the supervisor saw in the service's log after line FROM_LINE, and on a timeout the log's end.
wait_host() {
	local name log probe
	name=$(host_service "$1")
	log="$DIR/$1/$name.log"
	case $1 in
	gw*) probe=(ready "${ADDR[$1]}") ;;
	wk*) probe=(curl -fsS -m 2 "http://${ADDR[$1]}:9101/metrics") ;;
	db) probe=(curl -fsS -m 2 "http://${ADDR[$1]}:9102/metrics") ;;
	esac
	local what="$name on $1"
	(wait_for "$what" "${probe[@]}") || die "$what did not come up; the end of its log:"$'\n'"$(tail -n 15 "$log")"
	local exits
	exits=$(tail -n +"$((${2:-0} + 1))" "$log" | grep -B 3 '^fleet: .* exited with status' || true)
	[[ -z $exits ]] || log "$what started only after a restart; its log:"$'\n'"$exits"
}

log_lines() { if [[ -f $1 ]]; then wc -l <"$1"; else echo 0; fi; }

services_up() {
	[[ -x $REPO_ROOT/bin/gateway && -x $REPO_ROOT/bin/worker && -x $REPO_ROOT/bin/reconciler ]] ||
		die "bin/ is not built: run make build"
	local -a env
	mapfile -t env < <(redis_amqp_mysql_env h1)
	env "${env[@]}" "$REPO_ROOT/bin/gateway" migrate >"$DIR/db/migrate.log" 2>&1 ||
		die "migrate: $(tail -n 5 "$DIR/db/migrate.log")"
	# The first gateway declares the topology, on its first broker (h1): every queue of the
	# flow is a quorum queue with a member on each of the three nodes.
	start_host gw1
	wait_host gw1
	for h in gw2 wk1 wk2 db; do start_host "$h"; done
	for h in gw2 wk1 wk2 db; do wait_host "$h"; done
	log "gateways on ${ADDR[gw1]} ${ADDR[gw2]}, workers on ${ADDR[wk1]} ${ADDR[wk2]}, reconciler on ${ADDR[db]}"
}

haproxy_up() {
	local d="$DIR/lb"
	mkdir -p "$d"
	cat >"$d/haproxy.cfg" <<EOF
global
	maxconn 8192
	pidfile $d/haproxy.pid
	stats socket $d/haproxy.sock mode 600 level admin

defaults
	mode http
	timeout connect 1s
	timeout client 30s
	timeout server 15s
	timeout http-keep-alive 10s
	# A request is sent again to another gateway only when it could not be sent at all
	# (retry-on's default, conn-failure): a POST that reached a gateway is never repeated.
	retries 2
	option redispatch
	option forwardfor

# /readyz takes a gateway out when it cannot reach Redis, RabbitMQ or MySQL. When no gateway is
# ready the cause is shared by all (a Redis master failing over): taking every one out would
# only turn their answers (202 for the SKUs on healthy masters, a truthful 503 for the others)
# into HAProxy's own 503, so requests then go to the gateways whose process is up (/healthz).
frontend orders
	bind ${ADDR[lb]}:8080
	use_backend gateways if { nbsrv(gateways) gt 0 }
	default_backend gateways_alive

frontend stats
	bind ${ADDR[lb]}:8404
	stats enable
	stats uri /stats

backend gateways
	balance roundrobin
	option httpchk GET /readyz
	http-check expect status 200
	default-server inter 500ms fastinter 250ms downinter 500ms fall 2 rise 2
	server gw1 ${ADDR[gw1]}:8080 check
	server gw2 ${ADDR[gw2]}:8080 check

backend gateways_alive
	balance roundrobin
	option httpchk GET /healthz
	http-check expect status 200
	default-server inter 500ms fastinter 250ms downinter 500ms fall 2 rise 2
	server gw1 ${ADDR[gw1]}:8080 check
	server gw2 ${ADDR[gw2]}:8080 check
EOF
	command -v haproxy >/dev/null || die "haproxy is not installed (deploy/install-deps.sh)"
	in_ns lb haproxy -D -f "$d/haproxy.cfg"
	wait_for "HAProxy" ready "${ADDR[lb]}"
	log "HAProxy on ${ADDR[lb]}:8080 in front of both gateways"
}

cmd_up() {
	[[ $EUID == 0 ]] || die "the fleet needs root (ip netns)"
	cmd_down quiet
	rm -rf "$DIR"
	mkdir -p "$DIR"
	local started=$SECONDS
	net_up
	log "hosts up: $HOSTS on $BRIDGE ($NET.0/24)"
	mariadb_up &
	local mariadb_pid=$!
	redis_up
	rabbit_up
	wait "$mariadb_pid" || die "MariaDB did not start"
	services_up
	haproxy_up
	log "fleet up in $((SECONDS - started))s: $(cmd_env | grep FLEET_URL)"
}

# ---- faults ----------------------------------------------------------------------------------

host_arg() {
	[[ -n ${1:-} && -n ${ADDR[$1]:-} ]] || die "unknown host '${1:-}' (want one of $HOSTS)"
}

cmd_cut() { ip link set "$(ns "$1")" down; }
cmd_heal() { ip link set "$(ns "$1")" up; }

cmd_lose() {
	cmd_cut "$1"
	# Until the namespace lists none: a supervisor may start its program again between
	# the listing and the kill.
	local pids
	while pids=$(ip netns pids "$(ns "$1")" | tr '\n' ' ') && [[ -n ${pids// /} ]]; do
		# shellcheck disable=SC2086
		kill -KILL $pids 2>/dev/null || true
		sleep 0.1
	done
}

cmd_revive() {
	cmd_heal "$1"
	case $1 in
	gw* | wk* | db)
		local from
		from=$(log_lines "$DIR/$1/$(host_service "$1").log")
		start_host "$1"
		wait_host "$1" "$from"
		;;
	esac
}

cmd_kill_rabbit() {
	local pid
	pid=$(cat "$DIR/$1/rabbitmq/pid")
	kill -KILL "$pid"
	while [[ -d /proc/$pid ]]; do sleep 0.1; done
}

cmd_start_rabbit() {
	start_rabbit "$1"
	rabbit_wait "$1"
	wait_for "the RabbitMQ cluster of 3 nodes" rabbit_clustered
}

cmd_rabbit_leader() {
	local h leader
	for h in ${2:-$DATA_HOSTS}; do
		leader=$(rabbitmqctl_on "$h" -q list_queues --no-table-headers name leader 2>/dev/null |
			awk -v q="$1" '$1 == q {print $2}') && [[ -n $leader ]] && break
	done
	[[ -n ${leader:-} ]] || die "no leader found for $1"
	for h in $DATA_HOSTS; do [[ $leader == "$(rabbit_node "$h")" ]] && echo "$h" && return; done
	die "leader $leader is no fleet node"
}

cmd_rabbit_unacked() {
	local h
	for h in $DATA_HOSTS; do
		# A channel's name starts with its client's address: "10.213.7.31:40112 -> ...".
		rabbitmqctl_on "$h" -q list_channels --no-table-headers name messages_unacknowledged 2>/dev/null |
			awk -v ip="${ADDR[$1]}" 'index($1, ip ":") == 1 {n += $NF} END {print n + 0}' && return
	done
	die "no RabbitMQ node answered"
}

cmd_rabbit_consumers() {
	local h
	for h in $DATA_HOSTS; do
		# A consumer names its channel by pid; the channel's name starts with its client's address.
		local channels consumers
		channels=$(rabbitmqctl_on "$h" -q list_channels --no-table-headers pid name 2>/dev/null) || continue
		consumers=$(rabbitmqctl_on "$h" -q list_consumers --no-table-headers channel_pid 2>/dev/null) || continue
		awk -v ip="${ADDR[$1]}" 'NR == FNR {if (index($2, ip ":") == 1) mine[$1] = 1; next}
			$1 in mine {n++} END {print n + 0}' <(echo "$channels") <(echo "$consumers")
		return
	done
	die "no RabbitMQ node answered"
}

cmd_rabbit_running() {
	local h running
	for h in ${1:-$DATA_HOSTS}; do
		running=$(rabbitmqctl_on "$h" -q eval 'rabbit_nodes:all_running().' 2>/dev/null) || continue
		for r in $DATA_HOSTS; do
			[[ $running == *"$(rabbit_node "$r")"* ]] && echo "$r"
		done
		return 0
	done
	die "no RabbitMQ node answered"
}

cmd_lb_status() {
	curl -fsS -m 2 "http://${ADDR[lb]}:8404/stats;csv" | awk -F, -v s="$1" '$1 == "gateways" && $2 == s {print $18, $37}'
}

cmd_addr() { echo "${ADDR[$1]}"; }

cluster_ok_everywhere() {
	local h
	for h in $DATA_HOSTS; do
		for p in 7000 7001; do
			redis_cli -h "${ADDR[$h]}" -p $p cluster info | grep -q '^cluster_state:ok' || return 1
		done
	done
	[[ $(redis_cli -h "${ADDR[h1]}" -p 7000 cluster nodes | grep -cE '[ ,]slave ' || true) == 3 ]] || return 1
	for h in $DATA_HOSTS; do
		for p in 7000 7001; do
			if redis_cli -h "${ADDR[$h]}" -p $p info replication | grep -q '^role:slave'; then
				redis_cli -h "${ADDR[$h]}" -p $p info replication | grep -q 'master_link_status:up' || return 1
			fi
		done
	done
}

backends_up() {
	[[ $(curl -fsS -m 2 "http://${ADDR[lb]}:8404/stats;csv" | awk -F, '$1=="gateways" && $2 ~ /^gw/ && $18=="UP"' | wc -l) == 2 ]]
}

# masters_home puts each host's master back on its :7000: after a failover the promoted replica
# shares a host with that host's own master, and cutting that host would take two of three
# masters, the cluster's majority, with it. CLUSTER FAILOVER on the old master (now a replica)
# swaps the roles without losing a write.
masters_home() {
	local h
	for h in $DATA_HOSTS; do
		if redis_cli -h "${ADDR[$h]}" -p 7000 role | head -n 1 | grep -q slave; then
			log "giving the master role back to ${ADDR[$h]}:7000"
			redis_ok -h "${ADDR[$h]}" -p 7000 cluster failover || die "CLUSTER FAILOVER on $h refused"
			wait_for "${ADDR[$h]}:7000 to be a master again" master_at "$h"
		fi
	done
}
master_at() { redis_cli -h "${ADDR[$1]}" -p 7000 role | head -n 1 | grep -q master; }

cmd_wait_healthy() {
	wait_for "the Redis Cluster to be whole" cluster_ok_everywhere
	masters_home
	wait_for "the Redis Cluster to be whole" cluster_ok_everywhere
	wait_for "the RabbitMQ cluster of 3 nodes" rabbit_clustered
	wait_for "both gateways UP in HAProxy" backends_up
}

cmd_exec() {
	local h=$1
	shift
	local -a env
	mapfile -t env < <(cmd_env)
	in_ns "$h" env "${env[@]}" SURGE_LOG_LEVEL=warn "$@"
}

# ---- down and status -------------------------------------------------------------------------

fleet_namespaces() { ip netns list 2>/dev/null | awk '{print $1}' | grep '^surge-' || true; }

cmd_down() {
	local quiet=${1:-}
	local -a nss
	mapfile -t nss < <(fleet_namespaces)
	# Every fleet process lives in a fleet namespace: stop them by the ids the namespace
	# lists, TERM first, KILL what is left after 10 s.
	local pids
	for sig in TERM KILL; do
		pids=""
		for n in "${nss[@]}"; do pids+=" $(ip netns pids "$n" 2>/dev/null | tr '\n' ' ')"; done
		[[ -z ${pids// /} ]] && break
		[[ $sig == KILL ]] && log "killing what did not stop:$pids"
		# shellcheck disable=SC2086
		kill -s "$sig" $pids 2>/dev/null || true
		for _ in $(seq 1 40); do
			local left=""
			for p in $pids; do [[ -d /proc/$p ]] && left+=" $p"; done
			[[ -z $left ]] && break
			sleep 0.25
		done
	done
	for n in "${nss[@]}"; do
		ip link del "$n" 2>/dev/null || true
		ip netns del "$n"
	done
	ip link del "$BRIDGE" 2>/dev/null || true
	[[ -n $quiet ]] || log "fleet down: no namespace, link or process left"
}

cmd_status() {
	local -a nss
	mapfile -t nss < <(fleet_namespaces)
	if ((${#nss[@]} == 0)); then
		echo "fleet: down"
		return 0
	fi
	for n in "${nss[@]}"; do
		local procs
		procs=$(ip netns pids "$n" | xargs -r ps -o comm= -p | sort | uniq -c | awk '{printf "%s(%s) ", $2, $1}')
		printf '%-10s %-12s %s %s\n' "$n" "$(ip -n "$n" -br -4 addr show eth0 | awk '{print $3}')" \
			"$(ip -br link show "$n" 2>/dev/null | awk '{print $2}')" "$procs"
	done
	echo "--- redis cluster (from ${ADDR[h2]}:7000)"
	redis_cli -h "${ADDR[h2]}" -p 7000 cluster nodes 2>&1 | awk '{print $2, $3, $8, $9}' | sort || true
	echo "--- rabbitmq (from h2)"
	rabbitmqctl_on h2 -q eval 'rabbit_nodes:all_running().' 2>&1 || true
	echo "--- haproxy"
	curl -fsS -m 2 "http://${ADDR[lb]}:8404/stats;csv" 2>&1 | awk -F, '$1=="gateways"{print $2, $18}' || true
}

case "${1:-}" in
up) cmd_up ;;
down) cmd_down ;;
status) cmd_status ;;
env) cmd_env ;;
cut | heal | lose | revive | kill-rabbit | start-rabbit | rabbit-unacked | rabbit-consumers | lb-status | addr)
	host_arg "${2:-}"
	"cmd_${1//-/_}" "$2"
	;;
rabbit-leader) cmd_rabbit_leader "${2:?queue}" "${3:-}" ;;
rabbit-running) cmd_rabbit_running "${2:-}" ;;
wait-healthy) cmd_wait_healthy ;;
exec)
	host_arg "${2:-}"
	shift
	cmd_exec "$@"
	;;
*)
	echo "usage: $0 up|down|status|env|wait-healthy|rabbit-running|cut|heal|lose|revive|kill-rabbit|start-rabbit|rabbit-unacked|rabbit-consumers|lb-status|addr HOST|rabbit-leader QUEUE [ASK]|exec HOST CMD..." >&2
	exit 2
	;;
esac
