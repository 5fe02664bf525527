package preflight

import (
	"context"
	"crypto/tls"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"surge/pkg/redisnode"
)

// DefaultServiceUsers are the ACL users deploy/users.sh creates.
var DefaultServiceUsers = []string{"surge-gateway", "surge-worker", "surge-reconciler", "surge-ops", "surge-exporter"}

// readsConfig are the users that may read the configuration (config|get):
// surge-ops to run this preflight, surge-exporter to export maxmemory.
var readsConfig = map[string]bool{"surge-ops": true, "surge-exporter": true}

// Dangerous are the commands no service user may run: each wipes,
// reconfigures, blocks or walks the whole keyspace of a node.
var Dangerous = [][]string{
	{"FLUSHALL"}, {"FLUSHDB"}, {"CONFIG", "SET", "maxmemory", "0"}, {"KEYS", "*"},
	{"DEBUG", "SLEEP", "0"}, {"SHUTDOWN"}, {"ACL", "SETUSER", "intruder"},
}

// configKeys are read from every node.
var configKeys = []string{"appendonly", "appendfsync", "maxmemory", "maxmemory-policy",
	"min-replicas-to-write", "min-replicas-max-lag", "maxclients"}

// RedisOptions locates the cluster and the users to verify.
type RedisOptions struct {
	// Seeds are asked for the topology.
	Seeds []string
	// Username and Password are the preflight's own credentials: the
	// administrator or surge-ops (it needs INFO, CONFIG GET, CLUSTER NODES
	// and ACL DRYRUN).
	Username, Password string
	// TLS, when set, is used to reach every node (the anonymous PING
	// too: it tests the password, not the certificate). Default nil.
	TLS *tls.Config
	// ServiceUsers are verified with ACL DRYRUN. Default
	// DefaultServiceUsers.
	ServiceUsers []string
	// Timeout bounds the Redis part. Default 10s (also for a negative
	// value).
	Timeout time.Duration
}

// RedisFacts is what the cluster's nodes said.
type RedisFacts struct {
	// Err is set when no seed gave the topology; nothing else is then set.
	Err       error
	Nodes     []redisnode.Node
	Snapshots []redisnode.Snapshot
	// Anonymous maps each node to its answer to PING without credentials:
	// nil means the node accepted it.
	Anonymous map[string]error
	// DryRuns are the ACL DRYRUN answers of each node for each service
	// user and dangerous command.
	DryRuns []DryRun
}

// DryRun is one ACL DRYRUN answer.
type DryRun struct {
	Addr, User, Command string
	// Reply is "OK" when the user may run the command, else Redis's
	// explanation; Err is set when DRYRUN itself failed (unknown user,
	// no right to run DRYRUN, node down).
	Reply string
	Err   error
}

func (o *RedisOptions) setDefaults() {
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if len(o.ServiceUsers) == 0 {
		o.ServiceUsers = DefaultServiceUsers
	}
}

// GatherRedis reads every node of the cluster.
func GatherRedis(ctx context.Context, opts RedisOptions) RedisFacts {
	opts.setDefaults()
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	p := redisnode.NewProber(redisnode.Options{Username: opts.Username, Password: opts.Password, TLS: opts.TLS})
	defer p.Close()
	var f RedisFacts
	f.Nodes, f.Err = p.Topology(ctx, opts.Seeds)
	if f.Err != nil {
		return f
	}
	f.Snapshots = p.SnapshotAll(ctx, redisnode.Addrs(f.Nodes), configKeys...)
	var up []string // nodes that answered; the others are reported down
	for _, s := range f.Snapshots {
		if s.Err == nil {
			up = append(up, s.Addr)
		}
	}
	f.Anonymous = anonymousPings(ctx, up, opts.TLS)
	f.DryRuns = dryRuns(ctx, p, up, opts.ServiceUsers)
	return f
}

// anonymousPings sends PING without credentials to each node.
func anonymousPings(ctx context.Context, addrs []string, tc *tls.Config) map[string]error {
	out := map[string]error{}
	for _, addr := range addrs {
		c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: time.Second,
			MaxRetries: -1, DialerRetries: 1, DisableIdentity: true, PoolSize: 1, TLSConfig: tc})
		out[addr] = c.Ping(ctx).Err()
		_ = c.Close()
	}
	return out
}

// dryRuns asks every node whether each user may run each dangerous
// command; the users of readsConfig are also allowed to read
// configuration, the others not.
func dryRuns(ctx context.Context, p *redisnode.Prober, addrs, users []string) []DryRun {
	var mu sync.Mutex
	var out []DryRun
	var wg sync.WaitGroup
	for _, addr := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := p.Client(addr)
			for _, user := range users {
				cmds := Dangerous
				if !readsConfig[user] {
					cmds = append(cmds[:len(cmds):len(cmds)], []string{"CONFIG", "GET", "maxmemory"})
				}
				for _, cmd := range cmds {
					args := []any{"acl", "dryrun", user}
					for _, a := range cmd {
						args = append(args, a)
					}
					reply, err := c.Do(ctx, args...).Text()
					mu.Lock()
					out = append(out, DryRun{Addr: addr, User: user, Command: strings.Join(cmd[:commandWords(cmd)], " "), Reply: reply, Err: err})
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return out
}

// commandWords is how many words name the command (CONFIG SET, not its
// arguments).
func commandWords(cmd []string) int {
	if len(cmd) > 1 && (cmd[0] == "CONFIG" || cmd[0] == "ACL") {
		return 2
	}
	return 1
}
