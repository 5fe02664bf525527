package preflight

import (
	"fmt"
	"sort"
	"strings"

	"surge/pkg/redisnode"
)

// CheckRedis checks the gathered cluster facts.
func CheckRedis(f RedisFacts) []Result {
	if f.Err != nil {
		return []Result{failf(ItemRedisReachable, "start the cluster (deploy/redis-cluster.sh start) or fix SURGE_REDIS_ADDRS and the credentials",
			"no seed answered CLUSTER NODES: %v", f.Err)}
	}
	return []Result{
		checkReachable(f), checkClusterState(f), checkMastersReplicas(f), checkAuth(f),
		checkServiceUsers(f), checkPersistence(f), checkMaxMemory(f), checkMinReplicas(f),
	}
}

func checkReachable(f RedisFacts) Result {
	var down []string
	for _, s := range f.Snapshots {
		if s.Err != nil {
			down = append(down, s.Err.Error())
		}
	}
	masters := 0
	for _, n := range f.Nodes {
		if n.IsMaster() {
			masters++
		}
	}
	return verdict(ItemRedisReachable, Fail, down,
		fmt.Sprintf("%d nodes answer (%d masters, %d replicas)", len(f.Snapshots), masters, len(f.Nodes)-masters),
		"restart the node (deploy/redis-cluster.sh restart-dead) or replace it")
}

func checkClusterState(f RedisFacts) Result {
	var bad []string
	for _, s := range f.Snapshots {
		if s.Err == nil && s.Cluster["cluster_state"] != "ok" {
			bad = append(bad, fmt.Sprintf("%s: cluster_state:%s", s.Addr, s.Cluster["cluster_state"]))
		}
	}
	return verdict(ItemClusterState, Fail, bad, "cluster_state:ok on every node",
		"assign every slot and bring failed masters back (redis-cli --cluster check / fix)")
}

// checkMastersReplicas wants at least three slot-serving masters, each
// with a replica in sync as the master itself reports (immediate), or as
// CLUSTER NODES sees it when the master did not answer.
func checkMastersReplicas(f RedisFacts) Result {
	snaps := snapshotsByAddr(f)
	var findings []string
	masters := 0
	for _, m := range f.Nodes {
		if !m.IsMaster() || len(m.Slots) == 0 || m.Failing() {
			continue
		}
		masters++
		if replicasInSync(m, f.Nodes, snaps) == 0 {
			findings = append(findings, fmt.Sprintf("master %s (slots %s) has no replica in sync", m.Addr, strings.Join(m.Slots, ",")))
		}
	}
	if masters < 3 {
		findings = append([]string{fmt.Sprintf("%d masters serve slots, want at least 3", masters)}, findings...)
	}
	return verdict(ItemMastersReplicas, Fail, findings, fmt.Sprintf("%d masters, each with a replica in sync", masters),
		"run at least 3 masters with one replica each; restart or re-add the lost replica (redis-cli --cluster add-node --cluster-slave)")
}

func replicasInSync(m redisnode.Node, nodes []redisnode.Node, snaps map[string]redisnode.Snapshot) int {
	n := 0
	if s, ok := snaps[m.Addr]; ok && s.Err == nil {
		for _, r := range redisnode.Replicas(s.Info) {
			if r.State == "online" {
				n++
			}
		}
		return n
	}
	for _, r := range nodes {
		if r.MasterID == m.ID && !r.Failing() && r.Connected {
			n++
		}
	}
	return n
}

func checkAuth(f RedisFacts) Result {
	var open []string
	for _, addr := range sortedKeys(f.Anonymous) {
		if f.Anonymous[addr] == nil {
			open = append(open, addr+" answers commands without a password")
		}
	}
	return verdict(ItemAuth, Fail, open, "every node refuses clients without credentials (NOAUTH)",
		"give the default user a password (requirepass/masterauth, or 'user default on >PASSWORD' in the ACL file)")
}

// checkServiceUsers fails when a service user may run a dangerous command,
// is missing on a node, or cannot be verified.
func checkServiceUsers(f RedisFacts) Result {
	nodesOf := map[string][]string{}
	var order []string
	note := func(finding, addr string) {
		if _, ok := nodesOf[finding]; !ok {
			order = append(order, finding)
		}
		nodesOf[finding] = append(nodesOf[finding], addr)
	}
	fix := "run deploy/users.sh apply redis (grants: deploy/redis-users.acl)"
	for _, d := range f.DryRuns {
		switch {
		case d.Err != nil && strings.Contains(d.Err.Error(), "not found"):
			note(fmt.Sprintf("user %s is missing", d.User), d.Addr)
		case d.Err != nil && strings.HasPrefix(d.Err.Error(), "NOPERM"):
			note("cannot verify the grants: this preflight user may not run ACL DRYRUN", d.Addr)
			fix = "run the preflight as surge-ops or the administrator; " + fix
		case d.Err != nil:
			note(fmt.Sprintf("ACL DRYRUN %s failed: %v", d.User, d.Err), d.Addr)
		case d.Reply == "OK":
			note(fmt.Sprintf("%s may run %s", d.User, d.Command), d.Addr)
		}
	}
	var findings []string
	for _, finding := range order {
		findings = append(findings, fmt.Sprintf("%s on %s", finding, strings.Join(nodesOf[finding], ",")))
	}
	users := map[string]bool{}
	for _, d := range f.DryRuns {
		users[d.User] = true
	}
	return verdict(ItemServiceUsers, Fail, findings,
		fmt.Sprintf("%s exist on every node without FLUSHALL, FLUSHDB, CONFIG SET, KEYS, DEBUG, SHUTDOWN or ACL changes", strings.Join(sortedKeys(users), ", ")),
		fix)
}

// configFindings runs check on each node whose configuration was read and
// reports nodes whose configuration could not be read.
func configFindings(f RedisFacts, check func(s redisnode.Snapshot) (fail, warn string)) (fails, warns []string) {
	for _, s := range f.Snapshots {
		switch {
		case s.Err != nil:
			continue // reported by redis.reachable
		case s.ConfigErr != nil:
			fails = append(fails, fmt.Sprintf("cannot read CONFIG on %s: %v", s.Addr, s.ConfigErr))
			continue
		}
		fl, wn := check(s)
		if fl != "" {
			fails = append(fails, s.Addr+": "+fl)
		}
		if wn != "" {
			warns = append(warns, s.Addr+": "+wn)
		}
	}
	return fails, warns
}

// graded fails on fails, else warns on warns, else passes.
func graded(item string, fails, warns []string, ok, fix string) Result {
	if len(fails) > 0 {
		return Result{Item: item, Status: Fail, Detail: strings.Join(append(fails, warns...), "; "), Fix: fix}
	}
	return verdict(item, Warn, warns, ok, fix)
}

func checkPersistence(f RedisFacts) Result {
	fails, warns := configFindings(f, func(s redisnode.Snapshot) (string, string) {
		switch {
		case s.Config["appendonly"] != "yes":
			return "appendonly " + s.Config["appendonly"], ""
		case s.Config["appendfsync"] == "always":
			return "", "appendfsync always (safe, but every write waits for the disk)"
		case s.Config["appendfsync"] != "everysec":
			return "appendfsync " + s.Config["appendfsync"], ""
		}
		return "", ""
	})
	return graded(ItemPersistence, fails, warns, "appendonly yes, appendfsync everysec on every node",
		"CONFIG SET appendonly yes; CONFIG SET appendfsync everysec; CONFIG REWRITE (deploy/redis-cluster.sh writes both)")
}

func checkMaxMemory(f RedisFacts) Result {
	fails, warns := configFindings(f, func(s redisnode.Snapshot) (string, string) {
		policy, maxmem := s.Config["maxmemory-policy"], s.Config["maxmemory"]
		switch {
		case maxmem == "0" || maxmem == "":
			return "maxmemory is not set: the node grows until the kernel kills it", ""
		case strings.HasPrefix(policy, "allkeys-"):
			return "maxmemory-policy " + policy + " would evict stock keys", ""
		case strings.HasPrefix(policy, "volatile-"):
			return "maxmemory-policy " + policy + " would evict order states, idempotency records and lock leases (they carry a TTL)", ""
		case policy != "noeviction":
			return "maxmemory-policy " + policy + " is not noeviction", ""
		}
		used, _ := redisnode.Float(s.Info, "used_memory")
		limit, _ := redisnode.Float(s.Info, "maxmemory")
		if limit > 0 && used/limit > 0.8 {
			return "", fmt.Sprintf("uses %.0f%% of maxmemory", 100*used/limit)
		}
		return "", ""
	})
	return graded(ItemMaxMemory, fails, warns, "maxmemory set with noeviction on every node (a full node refuses new orders, and evicts nothing)",
		"CONFIG SET maxmemory <bytes>; CONFIG SET maxmemory-policy noeviction; CONFIG REWRITE")
}

func checkMinReplicas(f RedisFacts) Result {
	var unset []string
	var set []string
	_, _ = configFindings(f, func(s redisnode.Snapshot) (string, string) {
		if n := s.Config["min-replicas-to-write"]; n == "0" || n == "" {
			unset = append(unset, s.Addr)
		} else {
			set = append(set, fmt.Sprintf("%s: %s replica(s) within %ss", s.Addr, n, s.Config["min-replicas-max-lag"]))
		}
		return "", ""
	})
	if len(unset) > 0 {
		sort.Strings(unset)
		return Result{Item: ItemMinReplicas, Status: Warn,
			Detail: "min-replicas-to-write 0 on " + strings.Join(unset, ",") + ": a master acknowledges writes no replica has, which a failover then loses (the reconciler repairs them; MySQL never oversells)",
			Fix:    "consider CONFIG SET min-replicas-to-write 1 and min-replicas-max-lag 10: a master then refuses writes (503, retried) while its replica is away"}
	}
	return Result{Item: ItemMinReplicas, Status: Pass, Detail: strings.Join(set, "; ")}
}

func snapshotsByAddr(f RedisFacts) map[string]redisnode.Snapshot {
	out := map[string]redisnode.Snapshot{}
	for _, s := range f.Snapshots {
		out[s.Addr] = s
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
