package console

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"surge/pkg/redisnode"
)

// Probe is one engine's readiness check.
type Probe struct {
	Name string
	Ping func(ctx context.Context) error
}

// Health gathers what the health page shows. Nil fields are left out.
type Health struct {
	// Checks are the engines' readiness probes (GET /v1/admin/readyz's,
	// MySQL included).
	Checks []Probe
	// Queues are the queue names whose depth is shown: the work queue,
	// the retry tiers, the dead letters, the discarded copies.
	Queues []string
	// Depth reads a queue's ready messages and consumers
	// (queue.QueueDepth).
	Depth func(ctx context.Context, queue string) (messages, consumers int, err error)
	// Rates reads every queue's publish, deliver and ack rates
	// (Management.Rates). Nil: the page says n/a.
	Rates func(ctx context.Context) (map[string]QueueRate, error)
	// Redis reads the cluster node by node from Seeds.
	Redis *redisnode.Prober
	Seeds []string
}

type checkRow struct {
	Name  string
	OK    bool
	Error string
	Took  string
}

type queueRow struct {
	Name                string
	Messages, Consumers int
	Error               string
	// Rate is nil when the rates are not known (RatesNote says why).
	Rate *QueueRate
}

type nodeRow struct {
	Addr, ID, Role, Master, Slots, Memory, Error string
	Failing                                      bool
	LagBytes, LagSeconds                         int64
	// LagKnown is false when the replica's master did not say (its INFO
	// was refused or failed).
	LagKnown, Lagging bool
}

type healthData struct {
	Checks     []checkRow
	Queues     []queueRow
	Nodes      []nodeRow
	NodesError string
	// RatesNote says why the queues show no rates: "" when they do.
	RatesNote string
	At        time.Time
}

func (h *Health) gather(ctx context.Context) healthData {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	d := healthData{At: time.Now(), Checks: make([]checkRow, len(h.Checks)), Queues: make([]queueRow, len(h.Queues))}
	var wg sync.WaitGroup
	for i, c := range h.Checks {
		wg.Go(func() {
			start := time.Now()
			err := c.Ping(ctx)
			d.Checks[i] = checkRow{Name: c.Name, OK: err == nil, Took: time.Since(start).Round(time.Millisecond).String()}
			if err != nil {
				d.Checks[i].Error = err.Error()
			}
		})
	}
	for i, q := range h.Queues {
		wg.Go(func() {
			d.Queues[i] = queueRow{Name: q}
			if h.Depth == nil {
				return
			}
			m, n, err := h.Depth(ctx, q)
			d.Queues[i].Messages, d.Queues[i].Consumers = m, n
			if err != nil {
				d.Queues[i].Error = err.Error()
			}
		})
	}
	if h.Redis != nil {
		wg.Go(func() { d.Nodes, d.NodesError = h.nodes(ctx) })
	}
	var rates map[string]QueueRate
	var ratesErr error
	if h.Rates != nil {
		wg.Go(func() { rates, ratesErr = h.Rates(ctx) })
	}
	wg.Wait()
	switch {
	case h.Rates == nil:
		d.RatesNote = "n/a: set SURGE_RABBITMQ_MANAGEMENT_URL to show the rates"
	case ratesErr != nil:
		d.RatesNote = "n/a: " + ratesErr.Error()
	default:
		for i := range d.Queues {
			if r, ok := rates[d.Queues[i].Name]; ok {
				d.Queues[i].Rate = &r
			}
		}
	}
	return d
}

// nodes is the cluster's node map: each node's role, slots and memory,
// and each replica's lag as its master sees it.
func (h *Health) nodes(ctx context.Context) ([]nodeRow, string) {
	nodes, err := h.Redis.Topology(ctx, h.Seeds)
	if err != nil {
		return nil, err.Error()
	}
	addrOf := map[string]string{}
	for _, n := range nodes {
		addrOf[n.ID] = n.Addr
	}
	snaps := h.Redis.SnapshotAll(ctx, redisnode.Addrs(nodes))
	byAddr := map[string]redisnode.Snapshot{}
	lag := map[string]redisnode.Replica{}
	for _, s := range snaps {
		byAddr[s.Addr] = s
		for _, r := range redisnode.Replicas(s.Info) {
			lag[r.Addr] = r
		}
	}
	rows := make([]nodeRow, 0, len(nodes))
	for _, n := range nodes {
		row := nodeRow{Addr: n.Addr, ID: shortID(n.ID), Role: "replica", Failing: n.Failing(), Slots: strings.Join(n.Slots, " ")}
		if n.IsMaster() {
			row.Role = "master"
		} else {
			row.Master = addrOf[n.MasterID]
			if r, ok := lag[n.Addr]; ok {
				row.LagBytes, row.LagSeconds, row.LagKnown = r.LagBytes, r.LagSeconds, true
				// A replica acknowledges every second: lag within 2 s is
				// normal under writes.
				row.Lagging = r.State != "online" || r.LagSeconds > 2
			}
		}
		if s, ok := byAddr[n.Addr]; ok {
			row.Memory = s.Info["used_memory_human"]
			switch {
			case s.Err != nil && strings.Contains(s.Err.Error(), "NOPERM"):
				row.Memory = "INFO refused to this user (SURGE_CONSOLE_REDIS_USER)"
			case s.Err != nil:
				row.Error = s.Err.Error()
			}
		}
		rows = append(rows, row)
	}
	// Masters first, each followed by its replicas.
	ordered := make([]nodeRow, 0, len(rows))
	for _, m := range rows {
		if m.Role != "master" {
			continue
		}
		ordered = append(ordered, m)
		for _, r := range rows {
			if r.Role != "master" && r.Master == m.Addr {
				ordered = append(ordered, r)
			}
		}
	}
	for _, r := range rows {
		if r.Role != "master" && !hasAddr(ordered, r.Addr) {
			ordered = append(ordered, r)
		}
	}
	return ordered, ""
}

func hasAddr(rows []nodeRow, addr string) bool {
	for _, r := range rows {
		if r.Addr == addr {
			return true
		}
	}
	return false
}

func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func (c *Console) health(w http.ResponseWriter, r *http.Request, s *session) {
	c.render(w, http.StatusOK, "health.html", s, "Health", "health", c.healths.get(r.Context(), ""))
}

// buildHealth reads the engines once for every viewer of the health page.
func (c *Console) buildHealth(ctx context.Context, _ string) healthData {
	if c.Health == nil {
		return healthData{At: c.Now()}
	}
	return c.Health.gather(ctx)
}
