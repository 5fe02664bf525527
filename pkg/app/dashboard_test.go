package app_test

import (
	"surge/internal/dashboard"

	"context"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"surge/internal/testkit"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	amqp "github.com/rabbitmq/amqp091-go"

	"surge/internal/apitest"
	"surge/internal/apptest"
	"surge/internal/testenv"
	"surge/pkg/admin"
	"surge/pkg/keys"
	"surge/pkg/lock"
	"surge/pkg/metrics"
	"surge/pkg/order"
	"surge/pkg/queue"
	"surge/pkg/reconcile"
	"surge/pkg/store"
	"surge/pkg/worker"
)

// still names the dashboard's queries that no small sale in a test can
// move, and why: "panel title" for every query of the panel, "title#i"
// for its i-th query (from 0). Every other query must read a series that
// changes between the scrapes before and after the sale.
var still = map[string]string{
	"Rate-limited requests#1": "decision=\"error\" counts the limiter's Redis call failing; " +
		"the test does not break the shared Redis",
	"cluster_state per node": "1 on every node of a healthy cluster; it drops when slots are uncovered, " +
		"which takes a failed master of the shared cluster (test/chaos does it on a private one)",
	"Nodes up, masters, masters without replica": "the node count, the masters and their replicas " +
		"change only when a node dies or fails over (test/chaos)",
	"Role (1 master, 0 replica)":  "roles change only on a failover (test/chaos)",
	"Evicted keys":                "Redis runs with noeviction: an evicted key is the fault the panel is there to catch",
	"used_memory and maxmemory#1": "maxmemory is the nodes' configuration, not something a sale does",
	"Replication lag (bytes)": "the local replicas keep up with their masters: the lag is a few bytes " +
		"or none, before the sale and after alike, and whether a scrape catches it above 0 is chance; " +
		"it grows when a replica is paused or cut off (test/chaos)",
	"Replication lag (seconds) and links": "as the lag in bytes: the seconds since the last " +
		"acknowledgement read 0 or 1 by chance, and the links stay up unless a replica loses its master",
}

// TestDashboardPanelsMove: every panel of deploy/grafana-dashboard.json
// shows something a sale does. The services' registry and an exporter
// (the Redis Cluster per node and the test's queues, as opsctl exporter
// serves them) are scraped over HTTP before and after a small sale on the
// real engines: a gateway and a worker in process, orders accepted,
// invoiced and sold out, a rate-limited customer, product reads, a
// malformed message parked, an order retried on a busy lock, an order
// whose confirm came too late (outcome unknown), and a reconcile that
// repairs drift, recorded by metrics.ReconcileReport as the reconciler
// daemon records each sweep (the in-process gateway, worker and
// reconcile share metrics.Registry, served here as each service serves
// it). Each query's metric must have moved; the few that cannot are named
// in still, with why. (pkg/metrics's TestDashboardAndAlertsUsePublishedMetrics
// checks the names and labels the queries use.)
func TestDashboardPanelsMove(t *testing.T) {
	ctx := context.Background()
	c := apptest.Common(t)
	topo := c.AMQP.Topology()
	gcfg := apptest.GatewayConfig(t, c, "test-token")
	gcfg.RateLimit.CustomerRate, gcfg.RateLimit.CustomerBurst = 1, 2
	url, g := apptest.Gateway(t, gcfg, quietLog())
	adminURL := apptest.AdminURL(g)
	// A second gateway whose broker takes its orders and holds their
	// confirms back past the publish's bound: its orders are answered
	// outcome_unknown, and settle anyway.
	slowMQ := testenv.NewProxy(t, "127.0.0.1:5672")
	slow := apptest.GatewayConfig(t, c, "test-token")
	slow.AMQP.URL = strings.Replace(c.AMQP.URL, "127.0.0.1:5672", slowMQ.Addr(), 1)
	slow.ConfirmTimeout = 300 * time.Millisecond
	slow.PublishChannels = 1 // opened by a first order, before the stall
	slowURL, _ := apptest.Gateway(t, slow, quietLog())

	services := serveGatherer(t, metrics.Registry)
	conn, err := queue.Dial(ctx, c.AMQP.URL, queue.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	cc := metrics.NewClusterCollector(metrics.ClusterOptions{Seeds: testenv.RedisAddrs(), Password: testenv.RedisPassword()})
	t.Cleanup(func() { _ = cc.Close() })
	exp := prometheus.NewRegistry()
	exp.MustRegister(cc, metrics.NewQueueCollector(conn, metrics.TopologyQueues(topo)...))
	exporter := serveGatherer(t, exp)

	// Before: no worker consumes yet.
	before := mergeScrapes(scrapeSeries(t, services), scrapeSeries(t, exporter))
	apptest.Worker(t, apptest.WorkerConfig(t, c), quietLog())

	hc := apitest.Client(t)
	sku := testenv.Unique("dash-")
	testenv.CleanupSKU(t, testenv.Redis(t), sku)
	apptest.PutStock(t, hc, adminURL, "test-token", sku, 10, "Dashboard item", 900)
	run := testenv.Unique("dc")

	// The sale: 20 buyers for 10 units.
	var wg sync.WaitGroup
	codes := make([]int, 20)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = post(t, hc, url, "k", orderBody(sku, 1, fmt.Sprintf("%s-%d", run, i))).Status
		}()
	}
	wg.Wait()
	count := map[int]int{}
	for _, code := range codes {
		count[code]++
	}
	if count[http.StatusAccepted] != 10 || count[http.StatusConflict] != 10 {
		t.Fatalf("the sale answered %v, want 10 accepted and 10 sold out", count)
	}

	// One customer over its budget (2 orders, 1 a second), on a SKU with
	// units left: sold-out answers spend no budget.
	plenty := testenv.Unique("dash-plenty-")
	testenv.CleanupSKU(t, testenv.Redis(t), plenty)
	apptest.PutStock(t, hc, adminURL, "test-token", plenty, 10, "Dashboard item", 900)
	limited := 0
	for i := range 4 {
		if post(t, hc, url, "r-"+strconv.Itoa(i), orderBody(plenty, 1, run+"-greedy")).Status == http.StatusTooManyRequests {
			limited++
		}
	}
	if limited == 0 {
		t.Fatal("no request of the greedy customer was rate limited")
	}

	// Product reads: a rebuild, then hits.
	for range 3 {
		if resp, err := hc.Get(url + "/v1/products/" + sku); err == nil {
			resp.Body.Close()
		}
	}

	// A second SKU for the retry and the unknown outcome.
	sku2 := testenv.Unique("dash2-")
	testenv.CleanupSKU(t, testenv.Redis(t), sku2)
	apptest.PutStock(t, hc, adminURL, "test-token", sku2, 10, "Dashboard item 2", 900)
	if a := post(t, hc, slowURL, "slow-first", orderBody(sku2, 1, run+"-slow-first")); a.Status != http.StatusAccepted {
		t.Fatalf("the slow gateway's first order: %d %s", a.Status, a.Error.Code)
	}
	slowMQ.Stall()
	a := post(t, hc, slowURL, "slow", orderBody(sku2, 1, run+"-slow"))
	slowMQ.Resume()
	if a.Status != http.StatusServiceUnavailable || a.Error.Code != "outcome_unknown" {
		t.Fatalf("the gateway that gets no confirm in time answered %d %s, want 503 outcome_unknown", a.Status, a.Error.Code)
	}

	pub, err := queue.NewPublisher(conn, topo, queue.PublisherOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	// A malformed message: parked at once.
	if err := pub.PublishRaw(ctx, topo.Exchange, topo.RoutingKey, amqp.Publishing{
		MessageId: "not-an-order", DeliveryMode: amqp.Persistent, Body: []byte("not an order"),
	}); err != nil {
		t.Fatal(err)
	}
	// An order whose lock another holder keeps: the worker waits, gives
	// up, retries it through a tier, and invoices it once the lock is free.
	busy := order.Order{ID: order.IDFor(run+"-busy", "k", 0), SKU: sku2, Qty: 1, CustomerID: run + "-busy"}
	_, _, release, err := lock.NewGroup(lock.New(testenv.Redis(t), lock.Options{}), lock.GroupOptions{TTL: 30 * time.Second}).
		Hold(ctx, keys.SKUTag(sku2), worker.LockName(busy.ID))
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish(ctx, busy); err != nil {
		release()
		t.Fatal(err)
	}
	db, err := store.Open(ctx, c.MySQL.DSN, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	retries := func() float64 { return sumOf(scrapeSeries(t, services), "surge_retries_total") }
	testkit.WaitFor(t, "the busy order retried", 15*time.Second, func() (bool, error) {
		return retries() > sumOf(before, "surge_retries_total"), nil
	})
	release()
	testkit.WaitFor(t, "the busy order invoiced", 15*time.Second, func() (bool, error) {
		r, err := db.Order(ctx, busy.ID)
		return err == nil && r.Status == string(order.StatusInvoiced), err
	})

	// A reconcile that repairs drift: MySQL invoices an order Redis never
	// heard of (a commit a failover lost); recorded as the daemon records
	// each sweep.
	lost := order.Order{ID: order.IDFor(run+"-lost", "k", 0), SKU: sku2, Qty: 2, CustomerID: run + "-lost"}
	if _, err := db.Process(ctx, lost, 0); err != nil {
		t.Fatal(err)
	}
	rdb := testenv.Redis(t)
	rec := reconcile.New(rdb, reconcile.StoreLedger{Store: db}, reconcile.Options{StateTTL: c.IdempotencyTTL, Log: quietLog()})
	rep := rec.Run(ctx, false, sku2)
	metrics.ReconcileReport(rep)
	if rep.Summary[admin.SKURepaired] != 1 {
		t.Fatalf("reconcile of %s: %+v, want it repaired", sku2, rep.Summary)
	}

	// Every accepted order invoiced, the sold-out SKU's included.
	testkit.WaitFor(t, "the sale's orders invoiced", 15*time.Second, func() (bool, error) {
		n, err := db.InvoiceCount(ctx, sku)
		return n == 10, err
	})
	// The worker's MySQL transactions are counted, with the orders in them.
	if got := scrapeSeries(t, services); sumOf(got, "surge_worker_mysql_batches_total") < 1 ||
		sumOf(got, "surge_worker_mysql_batch_orders_total") < 10 {
		t.Fatalf("worker batches %v and batch orders %v, want at least one transaction and the sale's 10 orders",
			sumOf(got, "surge_worker_mysql_batches_total"), sumOf(got, "surge_worker_mysql_batch_orders_total"))
	}
	testkit.WaitFor(t, "the letter parked", 10*time.Second, func() (bool, error) {
		n, _, err := queue.QueueDepth(ctx, conn, topo.DeadQueue)
		return n >= 1, err
	})
	after := mergeScrapes(scrapeSeries(t, services), scrapeSeries(t, exporter))

	panels := dashboardPanels(t)
	used := map[string]bool{}
	for _, p := range panels {
		for i, expr := range p.exprs {
			key := fmt.Sprintf("%s#%d", p.title, i)
			why, ok := still[key]
			if ok {
				used[key] = true
			} else if why, ok = still[p.title]; ok {
				used[p.title] = true
			}
			sels := selectors(expr)
			if len(sels) == 0 {
				t.Errorf("panel %q query %d reads no metric: %s", p.title, i, expr)
				continue
			}
			moved := []string{}
			for _, s := range sels {
				if s.movedBetween(before, after) {
					moved = append(moved, s.name)
				}
			}
			switch {
			case ok:
				t.Logf("panel %q query %d not required to move (%s); moved: %v", p.title, i, why, moved)
			case len(moved) == 0:
				t.Errorf("panel %q: no series of query %d moved during the sale: %s", p.title, i, expr)
			}
		}
	}
	for key := range still {
		if !used[key] {
			t.Errorf("still names %q, which is no panel or query of the dashboard", key)
		}
	}
}

// serveGatherer serves g's GET /metrics on a free port until cleanup and
// returns the address.
func serveGatherer(t *testing.T, g prometheus.Gatherer) string {
	t.Helper()
	ep, err := metrics.ListenFor("127.0.0.1:0", g)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = ep.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return ep.Addr()
}

// scraped maps a sample's name and labels to its value; a histogram gives
// its _count, _sum and _bucket samples.
type scraped map[string]sample

type sample struct {
	name   string
	labels map[string]string
	value  float64
}

func seriesKey(name string, labels map[string]string) string {
	ks := make([]string, 0, len(labels))
	for k, v := range labels {
		ks = append(ks, k+"="+strconv.Quote(v))
	}
	sort.Strings(ks)
	return name + "{" + strings.Join(ks, ",") + "}"
}

func (s scraped) add(name string, labels map[string]string, v float64) {
	s[seriesKey(name, labels)] = sample{name, labels, v}
}

// scrapeSeries scrapes addr's /metrics and parses the text format.
func scrapeSeries(t *testing.T, addr string) scraped {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse the scrape of %s: %v", addr, err)
	}
	out := scraped{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out.add(name, labels, m.GetCounter().GetValue())
			case dto.MetricType_GAUGE:
				out.add(name, labels, m.GetGauge().GetValue())
			case dto.MetricType_UNTYPED:
				out.add(name, labels, m.GetUntyped().GetValue())
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				out.add(name+"_count", labels, float64(h.GetSampleCount()))
				out.add(name+"_sum", labels, h.GetSampleSum())
				for _, b := range h.GetBucket() {
					bl := map[string]string{"le": strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)}
					for k, v := range labels {
						bl[k] = v
					}
					out.add(name+"_bucket", bl, float64(b.GetCumulativeCount()))
				}
			}
		}
	}
	return out
}

func mergeScrapes(a, b scraped) scraped {
	for k, v := range b {
		a[k] = v
	}
	return a
}

// sum adds the samples called name.
func sumOf(s scraped, name string) float64 {
	total := 0.0
	for _, smp := range s {
		if smp.name == name {
			total += smp.value
		}
	}
	return total
}

type panel struct {
	title string
	exprs []string
}

// dashboardPanels reads every panel's queries (rows' panels included).
func dashboardPanels(t *testing.T) []panel {
	t.Helper()
	ps, err := dashboard.Panels("../../deploy/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var out []panel
	for _, p := range ps {
		out = append(out, panel{title: p.Title, exprs: p.Exprs})
	}
	if len(out) < 20 {
		t.Fatalf("the dashboard has %d panels, want the full set", len(out))
	}
	return out
}

// selector is a metric name in a query, with its label matchers.
type selector struct {
	name     string
	matchers []matcher
}

type matcher struct {
	label, op, value string
	re               *regexp.Regexp
}

var (
	selectorRe = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}`)
	matcherRe  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*("(?:[^"\\]|\\.)*")`)
	groupingRe = regexp.MustCompile(`\b(?:by|without|on|ignoring)\s*\([^)]*\)`)
	rangeRe    = regexp.MustCompile(`\[[^\]]*\]`)
	identRe    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	// promqlWords are the functions, aggregations and keywords the
	// dashboard's queries use.
	promqlWords = map[string]bool{
		"sum": true, "max": true, "min": true, "avg": true, "count": true, "rate": true, "irate": true,
		"increase": true, "delta": true, "deriv": true, "histogram_quantile": true, "time": true,
		"and": true, "or": true, "unless": true, "bool": true, "absent": true,
	}
	// targetLabels are added by Prometheus at the scrape, not by the
	// services: a matcher on them is not checked here.
	targetLabels = map[string]bool{"job": true, "instance": true}
)

// selectors extracts the metric names of a PromQL query, with their
// matchers.
func selectors(expr string) []selector {
	var out []selector
	for _, m := range selectorRe.FindAllStringSubmatch(expr, -1) {
		s := selector{name: m[1]}
		for _, lm := range matcherRe.FindAllStringSubmatch(m[2], -1) {
			v, err := strconv.Unquote(lm[3])
			if err != nil {
				v = strings.Trim(lm[3], `"`)
			}
			mt := matcher{label: lm[1], op: lm[2], value: v}
			if mt.op == "=~" || mt.op == "!~" {
				mt.re = regexp.MustCompile("^(?:" + v + ")$")
			}
			s.matchers = append(s.matchers, mt)
		}
		out = append(out, s)
	}
	rest := selectorRe.ReplaceAllString(expr, " ")
	rest = groupingRe.ReplaceAllString(rest, " ")
	rest = rangeRe.ReplaceAllString(rest, " ")
	for _, id := range identRe.FindAllString(rest, -1) {
		if !promqlWords[id] {
			out = append(out, selector{name: id})
		}
	}
	return out
}

func (s selector) matches(smp sample) bool {
	if smp.name != s.name {
		return false
	}
	for _, m := range s.matchers {
		if targetLabels[m.label] {
			continue
		}
		v := smp.labels[m.label]
		ok := false
		switch m.op {
		case "=":
			ok = v == m.value
		case "!=":
			ok = v != m.value
		case "=~":
			ok = m.re.MatchString(v)
		case "!~":
			ok = !m.re.MatchString(v)
		}
		if !ok {
			return false
		}
	}
	return true
}

// movedBetween tells whether a series s selects changed value, appeared
// or went away between the two scrapes.
func (s selector) movedBetween(before, after scraped) bool {
	for k, a := range after {
		if !s.matches(a) {
			continue
		}
		if b, ok := before[k]; !ok || b.value != a.value {
			return true
		}
	}
	for k, b := range before {
		if _, ok := after[k]; !ok && s.matches(b) {
			return true
		}
	}
	return false
}
