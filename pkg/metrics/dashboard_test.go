package metrics

import (
	"surge/internal/dashboard"

	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	amqp "github.com/rabbitmq/amqp091-go"

	"surge/internal/testenv"
	"surge/pkg/queue"
)

// family is a published metric family: its type and label names.
type family struct {
	histogram bool
	labels    map[string]bool
}

// published gathers what the services and the exporter actually publish:
// Registry after one request through Middleware, and the cluster and
// queue collectors scraping the local engines.
func published(t *testing.T) map[string]family {
	t.Helper()
	testenv.Redis(t)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /probe", func(w http.ResponseWriter, r *http.Request) {})
	Middleware(mux).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/probe", nil))

	url := testenv.AMQPURL(t)
	conn, err := queue.Dial(context.Background(), url, queue.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	dead := testenv.Unique("t.dash.") + ".dead"
	withChannel(t, conn, func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclare(dead, false, true, false, false, nil)
		return err
	})
	t.Cleanup(func() {
		withChannel(t, conn, func(ch *amqp.Channel) error { _, err := ch.QueueDelete(dead, false, false, false); return err })
	})
	cc := NewClusterCollector(ClusterOptions{Seeds: testenv.RedisAddrs(), Password: testenv.RedisPassword()})
	t.Cleanup(func() { _ = cc.Close() })
	exporter := prometheus.NewRegistry()
	exporter.MustRegister(cc, NewQueueCollector(conn, dead))

	out := map[string]family{}
	for _, g := range []prometheus.Gatherer{Registry, exporter} {
		fams, err := g.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			fam := family{histogram: f.GetType() == dto.MetricType_HISTOGRAM, labels: map[string]bool{}}
			for _, m := range f.GetMetric() {
				for _, lp := range m.GetLabel() {
					fam.labels[lp.GetName()] = true
				}
			}
			out[f.GetName()] = fam
		}
	}
	return out
}

// dashboardQueries returns each panel's title and queries; every panel but
// rows must query something.
func dashboardQueries(t *testing.T) map[string][]string {
	t.Helper()
	ps, err := dashboard.Panels("../../deploy/grafana-dashboard.json")
	if err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	out := map[string][]string{}
	for _, p := range ps {
		if len(p.Exprs) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		out[p.Title] = append(out[p.Title], p.Exprs...)
	}
	return out
}

// alertQueries returns each alert's and each recording rule's expression
// from alerts.yml, with the series a recording rule records replaced by its
// expression, so an alert on a recorded ratio is checked down to the
// published metrics it reads.
func alertQueries(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open("../../deploy/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	recorded := map[string]string{}
	rule := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if a, ok := strings.CutPrefix(line, "- alert: "); ok {
			rule = "alert " + a
		}
		if r, ok := strings.CutPrefix(line, "- record: "); ok {
			rule = "record " + r
		}
		if e, ok := strings.CutPrefix(line, "expr: "); ok {
			out[rule] = append(out[rule], e)
			if r, ok := strings.CutPrefix(rule, "record "); ok {
				recorded[r] = e
			}
		}
	}
	for rule, exprs := range out {
		for i, e := range exprs {
			for name, re := range recorded {
				e = regexp.MustCompile(regexp.QuoteMeta(name)+`\b`).ReplaceAllLiteralString(e, "("+re+")")
			}
			out[rule][i] = e
		}
	}
	return out
}

var (
	stringLit = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	selector  = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}`)
	matcher   = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)`)
	grouping  = regexp.MustCompile(`\b(?:by|without|on|ignoring)\s*\(([^)]*)\)`)
	rangeSel  = regexp.MustCompile(`\[[^\]]*\]`)
	ident     = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
)

// promql are the functions, aggregations and keywords the queries use.
var promql = map[string]bool{
	"sum": true, "max": true, "min": true, "avg": true, "count": true, "rate": true, "irate": true,
	"increase": true, "delta": true, "deriv": true, "histogram_quantile": true, "time": true,
	"and": true, "or": true, "unless": true, "bool": true, "absent": true,
}

// Prometheus's own series, and the labels it adds to every scrape.
var (
	builtinMetrics = map[string]bool{"up": true}
	targetLabels   = map[string]bool{"job": true, "instance": true}
)

// resolve finds the family a series name belongs to (a histogram's
// _bucket, _sum and _count included).
func resolve(fams map[string]family, name string) (family, bool) {
	if f, ok := fams[name]; ok {
		return f, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		f, ok := fams[strings.TrimSuffix(name, suffix)]
		if !ok || !f.histogram || !strings.HasSuffix(name, suffix) {
			continue
		}
		series := family{histogram: true, labels: map[string]bool{"le": suffix == "_bucket"}}
		for l := range f.labels {
			series.labels[l] = true
		}
		return series, true
	}
	return family{}, false
}

// TestDashboardAndAlertsUsePublishedMetrics: every panel of the Grafana
// dashboard and every alert queries metrics the services or the exporter
// publish, with labels those metrics carry.
func TestDashboardAndAlertsUsePublishedMetrics(t *testing.T) {
	fams := published(t)
	queries := dashboardQueries(t)
	if len(queries) < 20 {
		t.Fatalf("the dashboard has %d panels with queries, want the full set", len(queries))
	}
	alerts := alertQueries(t)
	if len(alerts) < 10 {
		t.Fatalf("alerts.yml has %d alerts, want the full set", len(alerts))
	}
	for title, q := range alerts {
		queries[title] = q
	}
	for title, exprs := range queries {
		for _, expr := range exprs {
			checkQuery(t, fams, title, expr)
		}
	}
}

func checkQuery(t *testing.T, fams map[string]family, title, expr string) {
	t.Helper()
	used := []family{}
	e := stringLit.ReplaceAllString(expr, `""`)
	for _, m := range selector.FindAllStringSubmatch(e, -1) {
		f, ok := resolve(fams, m[1])
		if !ok {
			continue // reported below as an unknown name
		}
		for _, lm := range matcher.FindAllStringSubmatch(m[2], -1) {
			if !f.labels[lm[1]] && !targetLabels[lm[1]] {
				t.Errorf("%s: %s has no label %q: %s", title, m[1], lm[1], expr)
			}
		}
	}
	e = selector.ReplaceAllString(e, "$1")
	groups := grouping.FindAllStringSubmatch(e, -1)
	e = grouping.ReplaceAllString(e, "")
	e = rangeSel.ReplaceAllString(e, "")
	names := 0
	for _, id := range ident.FindAllString(e, -1) {
		if promql[id] {
			continue
		}
		if builtinMetrics[id] {
			names++
			continue
		}
		f, ok := resolve(fams, id)
		if !ok {
			t.Errorf("%s: %q is not published by the services or the exporter: %s", title, id, expr)
			continue
		}
		names++
		used = append(used, f)
	}
	if names == 0 {
		t.Errorf("%s: the query reads no metric: %s", title, expr)
	}
	for _, g := range groups {
		for _, l := range strings.Split(g[1], ",") {
			l = strings.TrimSpace(l)
			if l == "" || targetLabels[l] {
				continue
			}
			found := false
			for _, f := range used {
				found = found || f.labels[l]
			}
			if !found {
				t.Errorf("%s: groups by %q, which no metric of the query carries: %s", title, l, expr)
			}
		}
	}
}
