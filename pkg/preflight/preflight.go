// Package preflight checks a live surge deployment against the production
// checklist: the Redis Cluster (state, masters and replicas, auth, service
// users' grants, persistence, memory policy, min-replicas), the host
// (overcommit, transparent huge pages, open files), RabbitMQ's queues,
// MySQL's schema and the gateway's admin token. Each item passes, warns or fails, with the fix.
//
// Gathering (talking to the engines) and checking are separate: the checks
// are pure functions over the gathered facts, so each verdict is tested on
// data captured from real nodes, and the live run is tested too.
package preflight

import (
	"context"
	"fmt"
	"strings"
)

// Status is one item's verdict.
type Status string

// Verdicts. Only Fail makes a deployment unfit (exit code 1).
const (
	Pass Status = "pass"
	Warn Status = "warn"
	Fail Status = "fail"
)

// Checklist items, in the order they are reported.
const (
	ItemRedisReachable  = "redis.reachable"
	ItemClusterState    = "redis.cluster_state"
	ItemMastersReplicas = "redis.masters_replicas"
	ItemAuth            = "redis.auth"
	ItemServiceUsers    = "redis.service_users"
	ItemPersistence     = "redis.persistence"
	ItemMaxMemory       = "redis.maxmemory"
	ItemMinReplicas     = "redis.min_replicas"
	ItemOvercommit      = "host.overcommit_memory"
	ItemHugePages       = "host.transparent_hugepages"
	ItemOpenFiles       = "host.open_files"
	ItemQueues          = "rabbitmq.queues"
	ItemSchema          = "mysql.schema"
	ItemAdminToken      = "gateway.admin_token"
)

// Result is one item's verdict with what was seen and how to fix it.
type Result struct {
	Item   string `json:"item"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// Report is a whole run.
type Report struct {
	// OK is true when no item failed.
	OK      bool     `json:"ok"`
	Results []Result `json:"checks"`
}

// Result returns the verdict of item, and false when it was not checked.
func (r Report) Result(item string) (Result, bool) {
	for _, res := range r.Results {
		if res.Item == item {
			return res, true
		}
	}
	return Result{}, false
}

// Failed lists the items that failed.
func (r Report) Failed() []string {
	var out []string
	for _, res := range r.Results {
		if res.Status == Fail {
			out = append(out, res.Item)
		}
	}
	return out
}

func newReport(results []Result) Report {
	r := Report{OK: true, Results: results}
	for _, res := range results {
		if res.Status == Fail {
			r.OK = false
		}
	}
	return r
}

// Options says where the deployment is.
type Options struct {
	Redis RedisOptions
	// Rabbit is checked when its URL is set.
	Rabbit RabbitOptions
	// MySQLDSN is checked when set.
	MySQLDSN string
	// AdminToken, when set, is the gateway's SURGE_ADMIN_TOKEN, checked
	// with CheckAdminToken.
	AdminToken *string
	// Host overrides where host facts are read (tests); nil reads this
	// machine.
	Host func() HostFacts
}

// Run gathers every fact and checks it.
func Run(ctx context.Context, opts Options) Report {
	redis := GatherRedis(ctx, opts.Redis)
	host := GatherHost
	if opts.Host != nil {
		host = opts.Host
	}
	results := CheckRedis(redis)
	results = append(results, CheckHost(host(), redis)...)
	if opts.Rabbit.URL != "" {
		results = append(results, CheckRabbit(GatherRabbit(ctx, opts.Rabbit)))
	}
	if opts.MySQLDSN != "" {
		results = append(results, CheckSchema(GatherSchema(ctx, opts.MySQLDSN)))
	}
	if opts.AdminToken != nil {
		results = append(results, CheckAdminToken(*opts.AdminToken))
	}
	return newReport(results)
}

// verdict builds a result from findings: no findings passes with ok; a
// finding of the given severity reports them all, one per line.
func verdict(item string, severity Status, findings []string, ok, fix string) Result {
	if len(findings) == 0 {
		return Result{Item: item, Status: Pass, Detail: ok}
	}
	return Result{Item: item, Status: severity, Detail: strings.Join(findings, "; "), Fix: fix}
}

func failf(item, fix, format string, args ...any) Result {
	return Result{Item: item, Status: Fail, Detail: fmt.Sprintf(format, args...), Fix: fix}
}
