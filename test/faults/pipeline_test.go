//go:build faults

package faults

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"surge/internal/testenv"
)

const (
	adminToken = "faults-admin"
	nGateways  = 2
	nWorkers   = 2
)

// pipeline is one run's gateways and workers on the private engines, with
// the run's own database, exchange and queues, and the test's clients.
type pipeline struct {
	t        *testing.T
	eng      *engines
	dir      string
	prefix   string // exchange and queue names start with it
	dbName   string
	env      []string
	gateways []*proc
	workers  []*proc
	urls     []string
	// adminURLs are the gateways' admin listeners, by index.
	adminURLs []string
	rdb       *redis.ClusterClient
	db        *sql.DB
	h         *history
	// dbProxy and mqProxy carry each service's links to MySQL and
	// RabbitMQ (by program: gateway, worker), for latency and resets.
	dbProxy, mqProxy map[string]*testenv.Proxy
	// verdicts are the run's failures, repeated after the logs' tails so a
	// failing run ends with why it failed.
	verdicts []string
}

// fail fails the run and keeps the reason for the run's last lines.
func (p *pipeline) fail(format string, args ...any) {
	p.t.Helper()
	msg := fmt.Sprintf(format, args...)
	p.verdicts = append(p.verdicts, msg)
	p.t.Error(msg)
}

func startPipeline(t *testing.T, eng *engines, run int, h *history, pr profile) *pipeline {
	t.Helper()
	p := &pipeline{t: t, eng: eng, dir: filepath.Join(eng.dir, fmt.Sprintf("run%d", run)),
		prefix: fmt.Sprintf("faults%d", run), h: h}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p.dbName = fmt.Sprintf("surge_run%d", run)
	dsn := eng.db.dsn(p.dbName)
	p.env = append(baseEnv(),
		"SURGE_REDIS_ADDRS="+strings.Join(eng.redis.Addrs(), ","), "SURGE_REDIS_PASSWORD="+eng.redis.Password,
		"SURGE_REDIS_POOL_SIZE=16", "SURGE_AMQP_URL="+eng.mq.url(),
		"SURGE_AMQP_EXCHANGE="+p.prefix, "SURGE_AMQP_QUEUE="+p.prefix+".created",
		"SURGE_AMQP_DEAD_QUEUE="+p.deadQueue(), "SURGE_AMQP_RETRY_DELAYS="+pr.tiers,
		"SURGE_MYSQL_DSN="+dsn, "SURGE_MYSQL_MAX_CONNS=20", "SURGE_ADMIN_TOKEN="+adminToken,
		"SURGE_WORKER_METRICS_ADDR=", "SURGE_RECONCILE_GRACE="+pr.grace.String(),
		"SURGE_WORKER_LOCK_TTL="+pr.lockTTL.String(), "SURGE_FAILOVER_DOUBT="+pr.doubt.String(),
		"SURGE_WORKER_PREFETCH=64", "SURGE_WORKER_CONCURRENCY=16", "SURGE_LOG_LEVEL=info")
	if out, err := p.command("gateway", "migrate").CombinedOutput(); err != nil {
		t.Fatalf("gateway migrate: %v\n%s", err, out)
	}
	var err error
	if p.db, err = sql.Open("mysql", dsn+"?parseTime=true&timeout=2s"); err != nil {
		t.Fatal(err)
	}
	p.rdb = eng.redis.client()
	p.startProxies(dsn)
	t.Cleanup(p.stop)
	for i := range nGateways {
		p.addGateway(i)
	}
	for i := range nWorkers {
		p.workers = append(p.workers, p.newProc(fmt.Sprintf("worker%d", i), "worker"))
	}
	if eng.fw != nil {
		for i, pr := range p.procs() {
			pr.uid = uidBase + i
		}
	}
	for _, pr := range append(append([]*proc{}, p.gateways...), p.workers...) {
		if err := pr.start(); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.waitReady(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *pipeline) deadQueue() string { return p.prefix + ".dead" }

func (p *pipeline) addGateway(i int) {
	port, err := freePort()
	if err != nil {
		p.t.Fatal(err)
	}
	adminPort, err := freePort()
	if err != nil {
		p.t.Fatal(err)
	}
	g := p.newProc(fmt.Sprintf("gateway%d", i), "gateway")
	g.env = append(g.env, fmt.Sprintf("SURGE_HTTP_ADDR=127.0.0.1:%d", port),
		fmt.Sprintf("SURGE_ADMIN_ADDR=127.0.0.1:%d", adminPort))
	p.gateways = append(p.gateways, g)
	p.urls = append(p.urls, fmt.Sprintf("http://127.0.0.1:%d", port))
	p.adminURLs = append(p.adminURLs, fmt.Sprintf("http://127.0.0.1:%d", adminPort))
}

// upMessage is the log message a program writes once it is up.
var upMessage = map[string]string{"gateway": `"msg":"gateway listening"`, "worker": `"msg":"worker consuming"`}

// startProxies puts a proxy between each service and MySQL, and between
// each service and RabbitMQ.
func (p *pipeline) startProxies(dsn string) {
	p.dbProxy, p.mqProxy = map[string]*testenv.Proxy{}, map[string]*testenv.Proxy{}
	for _, svc := range []string{"gateway", "worker"} {
		p.dbProxy[svc] = testenv.NewProxy(p.t, fmt.Sprintf("127.0.0.1:%d", p.eng.db.port))
		p.mqProxy[svc] = testenv.NewProxy(p.t, fmt.Sprintf("127.0.0.1:%d", p.eng.mq.port))
	}
}

func proxyPort(px *testenv.Proxy) int {
	_, port, _ := net.SplitHostPort(px.Addr())
	n, _ := strconv.Atoi(port)
	return n
}

// newProc is a program of the pipeline, reaching MySQL and RabbitMQ
// through its service's proxies.
func (p *pipeline) newProc(name, program string) *proc {
	env := append([]string{}, p.env...)
	env = append(env, "SURGE_MYSQL_DSN="+strings.Replace(p.eng.db.dsn(p.dbName), fmt.Sprintf(":%d)", p.eng.db.port),
		fmt.Sprintf(":%d)", proxyPort(p.dbProxy[program])), 1),
		fmt.Sprintf("SURGE_AMQP_URL=amqp://guest:guest@%s/", p.mqProxy[program].Addr()))
	return &proc{name: name, program: program, up: upMessage[program], bin: filepath.Join(bins, program), env: env,
		log: filepath.Join(p.dir, name+".log"), onExit: func(d death) {
			d.At = p.h.since()
			p.h.noteDeath(d)
		}}
}

func (p *pipeline) command(program string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(bins, program), args...)
	cmd.Env = p.env
	return cmd
}

func (p *pipeline) procs() []*proc { return append(append([]*proc{}, p.gateways...), p.workers...) }

// stop shuts the programs down and closes the test's clients; on failure
// it prints the tail of every log first.
func (p *pipeline) stop() {
	for _, pr := range p.procs() {
		pr.stop()
	}
	if p.t.Failed() {
		for _, pr := range p.procs() {
			p.t.Logf("--- last warnings and errors of %s (%s)\n%s", pr.name, pr.log, tailFile(pr.log, 12, `"level":"INFO"`))
		}
		for _, v := range p.verdicts {
			p.t.Logf("--- this run failed: %s", v)
		}
	}
	_ = p.db.Close()
	_ = p.rdb.Close()
}

// ensureRunning restarts any program that is not running and says so: a
// program the nemesis ended is restarted by the nemesis itself, and one
// that failed to start by its supervisor, so one found dead here died
// unasked (the history has its death) or could not start again.
func (p *pipeline) ensureRunning() error {
	// A program that failed to start is started again after a second:
	// give the healed engines' programs a moment to be up.
	_ = waitUntil(10*time.Second, 200*time.Millisecond, func() error {
		for _, pr := range p.procs() {
			if !pr.running() {
				return fmt.Errorf("%s not running", pr.name)
			}
		}
		return nil
	})
	var dead []string
	for _, pr := range p.procs() {
		if pr.running() {
			continue
		}
		dead = append(dead, pr.name)
		if err := pr.start(); err != nil {
			return err
		}
	}
	if len(dead) > 0 {
		return fmt.Errorf("%s not running: restarted, and the run fails", strings.Join(dead, ", "))
	}
	return nil
}

// waitReady waits until every gateway answers /readyz 200 (Redis and
// RabbitMQ reachable).
func (p *pipeline) waitReady(timeout time.Duration) error {
	c := &http.Client{Timeout: 3 * time.Second}
	return waitUntil(timeout, 250*time.Millisecond, func() error {
		for i, u := range p.urls {
			resp, err := c.Get(u + "/readyz")
			if err != nil {
				return fmt.Errorf("gateway%d: %w", i, err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("gateway%d /readyz: %d", i, resp.StatusCode)
			}
		}
		return nil
	})
}

// putStock sets sku's stock through gateway gw's admin API (its admin
// listener).
func (p *pipeline) putStock(ctx context.Context, gw int, sku string, stock int) (int, error) {
	return p.putStockLimit(ctx, gw, sku, stock, -1)
}

// putStockLimit is putStock that also sets the SKU's purchase limit per
// customer (limit < 0 keeps it).
func (p *pipeline) putStockLimit(ctx context.Context, gw int, sku string, stock, limit int) (int, error) {
	body := fmt.Sprintf(`{"stock":%d,"name":"Fault item","price_cents":700}`, stock)
	if limit >= 0 {
		body = fmt.Sprintf(`{"stock":%d,"name":"Fault item","price_cents":700,"max_per_customer":%d}`, stock, limit)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPut, p.adminURLs[gw]+"/v1/admin/stock/"+sku, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := (&http.Client{Timeout: 15 * time.Second}).Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// reconcile runs `reconciler once` until it is not busy and returns its
// exit code; the report goes to reconcile.log.
func (p *pipeline) reconcile(label string) int {
	f, err := os.OpenFile(filepath.Join(p.dir, "reconcile.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		p.t.Fatal(err)
	}
	defer f.Close()
	code := -1
	for try := 0; try < 5; try++ {
		var out bytes.Buffer
		cmd := p.command("reconciler", "once")
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		code = cmd.ProcessState.ExitCode()
		fmt.Fprintf(f, "=== %s (try %d): exit %d %v\n%s\n", label, try+1, code, err, out.String())
		if code != 3 {
			break
		}
		time.Sleep(2 * time.Second)
	}
	return code
}

// drain waits until the run's work queue and retry tiers have held no
// message, ready or unacknowledged, for three polls in a row: every
// accepted order reached its end (or the dead-letter queue).
func (p *pipeline) drain(timeout time.Duration) error {
	quiet := 0
	return waitUntil(timeout, time.Second, func() error {
		d, err := p.eng.mq.depths()
		if err != nil {
			quiet = 0
			return err
		}
		for q, n := range d {
			if strings.HasPrefix(q, p.prefix+".") && q != p.deadQueue() && n > 0 {
				quiet = 0
				return fmt.Errorf("%s holds %d messages", q, n)
			}
		}
		if quiet++; quiet < 3 {
			return fmt.Errorf("quiet for %d polls", quiet)
		}
		return nil
	})
}
