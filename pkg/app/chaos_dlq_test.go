//go:build chaos

package app_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"surge/internal/apptest"
	"surge/internal/testenv"
	"surge/internal/testkit"
	"surge/pkg/app"
	"surge/pkg/config"
	"surge/pkg/queue"
)

// TestMariaDBPausedWhileOrdersArrive: MariaDB stopped (SIGSTOP) for 15
// seconds while orders keep arriving. The gateway keeps accepting (it does
// not touch MySQL); the worker's attempts time out and go through the
// retry tiers; after MariaDB resumes every order is invoiced and none is
// dead-lettered. The paused MariaDB is a private one, never the shared
// server on 3306.
func TestMariaDBPausedWhileOrdersArrive(t *testing.T) {
	db := startPrivateMariaDB(t)
	c := commonConfig(t)
	c.MySQL.DSN = db.dsn("surge_chaos")
	// The tiers sum to far more than the outage plus one attempt's timeout.
	c.AMQP.RetryDelays = []time.Duration{2 * time.Second, 5 * time.Second, 20 * time.Second}
	t.Cleanup(func() { apptest.DeleteTopology(c) })
	if err := app.Migrate(context.Background(), c.MySQL.DSN, io.Discard); err != nil {
		t.Fatal(err)
	}
	url, g := startGateway(t, c)
	wcfg := workerConfig(t, c) // production defaults: batches, locks
	wcfg.OrderTimeout = 3 * time.Second
	apptest.Worker(t, wcfg, quietLog())
	p := &pipeline{URL: url, Admin: apptest.AdminURL(g), Token: "test-token", DB: openDB(t, c.MySQL.DSN), Stock: g.Stock, Cfg: c}
	sku := testenv.Unique("pause-")
	p.loadStock(t, sku, 1000)

	cl := newClient(t)
	accepted := map[string]bool{}
	placeOrder := func(i int) {
		a := post(t, cl, p.URL, fmt.Sprint("k-", i), orderBody(sku, 1, fmt.Sprintf("%s-c%d", sku, i)))
		if a.Status != http.StatusAccepted {
			t.Fatalf("order %d: %d %+v, want 202 (the gateway does not need MySQL)", i, a.Status, a.Error)
		}
		accepted[a.OrderID] = true
	}
	for i := range 10 {
		placeOrder(i)
	}
	testkit.WaitFor(t, "the first orders invoiced", 20*time.Second, func() (bool, error) {
		n, err := p.DB.InvoiceCount(context.Background(), sku)
		return n == 10, err
	})

	db.pause(t)
	stopped := time.Now()
	retried := watchRetries(t, p)
	for i := 10; i < 50; i++ { // 40 orders over the first 10 s of the outage
		placeOrder(i)
		time.Sleep(250 * time.Millisecond)
	}
	select {
	case <-retried:
	case <-time.After(15*time.Second - time.Since(stopped)):
		t.Fatal("no order reached a retry tier while MariaDB was stopped")
	}
	time.Sleep(15*time.Second - time.Since(stopped))
	db.resume(t)
	t.Logf("MariaDB stopped for %v", time.Since(stopped).Round(time.Second))
	for i := 50; i < 60; i++ {
		placeOrder(i)
	}

	testkit.WaitFor(t, "every order invoiced", 90*time.Second, allInvoiced(t, p, sku, func() int { return len(accepted) }))
	assertInvoicedOnce(t, p, sku, accepted, 1000)
}

// watchRetries reports (by closing the channel) the first time a retry
// tier holds a message.
func watchRetries(t *testing.T, p *pipeline) <-chan struct{} {
	conn := dlqConn(t, p)
	seen := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		for ctx.Err() == nil {
			for _, q := range p.Cfg.AMQP.Topology().RetryQueues() {
				if n, _, err := queue.QueueDepth(ctx, conn, q); err == nil && n > 0 {
					close(seen)
					return
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return seen
}

// allInvoiced is a waitFor condition: every accepted order has its
// invoice. Its error says how far it got and how many orders were parked.
func allInvoiced(t *testing.T, p *pipeline, sku string, accepted func() int) func() (bool, error) {
	conn := dlqConn(t, p)
	return func() (bool, error) {
		n, err := p.DB.InvoiceCount(context.Background(), sku)
		if err != nil {
			return false, err
		}
		dead, _, err := queue.QueueDepth(context.Background(), conn, p.Cfg.AMQP.Topology().DeadQueue)
		return n == accepted(), fmt.Errorf("%d of %d invoiced, %d dead-lettered (%v)", n, accepted(), dead, err)
	}
}

// assertInvoicedOnce checks that exactly the accepted orders are invoiced
// once each, that nothing is parked, and that Redis agrees with MySQL.
func assertInvoicedOnce(t *testing.T, p *pipeline, sku string, accepted map[string]bool, stock int) {
	t.Helper()
	ctx := context.Background()
	var ids []string
	if err := p.DB.DB().SelectContext(ctx, &ids, "SELECT order_id FROM invoices WHERE sku = ? ORDER BY order_id", sku); err != nil {
		t.Fatal(err)
	}
	want := make([]string, 0, len(accepted))
	for id := range accepted {
		want = append(want, id)
	}
	sort.Strings(want)
	if strings.Join(ids, ",") != strings.Join(want, ",") {
		t.Fatalf("invoiced %d orders, accepted %d: the sets differ", len(ids), len(want))
	}
	var orders int
	if err := p.DB.DB().GetContext(ctx, &orders, "SELECT COUNT(*) FROM orders WHERE sku = ?", sku); err != nil || orders != len(accepted) {
		t.Fatalf("orders rows %d (%v), want %d", orders, err, len(accepted))
	}
	s := dlqSettled(t, p, sku, len(accepted))
	if s.Reserved != 0 || s.Sold != len(accepted) || s.Avail != stock-len(accepted) {
		t.Fatalf("redis %+v, want every reservation committed", s)
	}
	conn := dlqConn(t, p)
	dead, err := queue.ListDead(ctx, conn, p.Cfg.AMQP.Topology())
	if err != nil || len(dead) != 0 {
		t.Fatalf("dead letters %+v (%v), want none", dead, err)
	}
}

// TestWorkerKilledMidBatch: a worker process SIGKILLed while orders flow
// loses and duplicates nothing. Its unacked deliveries go back to the
// queue and a fresh worker finishes them: every accepted order is
// invoiced exactly once and Redis agrees with MySQL.
func TestWorkerKilledMidBatch(t *testing.T) {
	bin := buildWorker(t)
	c := commonConfig(t)
	// Tiers longer than the order lock's lease, so an order whose lock the
	// killed worker still held is not parked before the lease expires.
	c.AMQP.RetryDelays = []time.Duration{time.Second, 3 * time.Second, 10 * time.Second}
	t.Cleanup(func() { apptest.DeleteTopology(c) })
	url, g := startGateway(t, c)
	p := &pipeline{URL: url, Admin: apptest.AdminURL(g), Token: "test-token", DB: openDB(t, c.MySQL.DSN), Stock: g.Stock, Cfg: c}
	sku := testenv.Unique("kill-")
	const stock, buyers = 500, 600
	p.loadStock(t, sku, stock)

	first := startWorkerProcess(t, bin, c, "first")
	var mu sync.Mutex
	accepted := map[string]bool{}
	posted := make(chan int, buyers)
	for i := range buyers {
		posted <- i
	}
	close(posted)
	var wg sync.WaitGroup
	cl := newClient(t)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range posted {
				a := post(t, cl, p.URL, "k", orderBody(sku, 1, fmt.Sprintf("%s-c%d", sku, i)))
				switch {
				case a.Status == http.StatusAccepted:
					mu.Lock()
					accepted[a.OrderID] = true
					mu.Unlock()
				case a.Status != http.StatusConflict:
					t.Errorf("buyer %d: %d %+v", i, a.Status, a.Error)
				}
			}
		}()
	}
	testkit.WaitFor(t, "the first worker to invoice some orders", 30*time.Second, func() (bool, error) {
		n, err := p.DB.InvoiceCount(context.Background(), sku)
		return n >= 20, err
	})
	first.kill(t)
	atKill, _ := p.DB.InvoiceCount(context.Background(), sku)
	mu.Lock()
	acceptedAtKill := len(accepted)
	mu.Unlock()
	wg.Wait()
	if atKill >= acceptedAtKill {
		t.Fatalf("the worker had invoiced all %d accepted orders when killed: nothing was in flight", acceptedAtKill)
	}
	t.Logf("killed with %d of %d accepted orders invoiced; %d accepted in all", atKill, acceptedAtKill, len(accepted))

	startWorkerProcess(t, bin, c, "second")
	testkit.WaitFor(t, "every accepted order invoiced", 60*time.Second, allInvoiced(t, p, sku, func() int { return len(accepted) }))
	if len(accepted) != stock {
		t.Fatalf("accepted %d orders, want the whole stock of %d", len(accepted), stock)
	}
	assertInvoicedOnce(t, p, sku, accepted, stock)
}

// buildWorker compiles services/worker into the test's temporary
// directory.
func buildWorker(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "worker")
	out, err := exec.Command("go", "build", "-o", bin, "surge/services/worker").CombinedOutput()
	if err != nil {
		t.Fatalf("build worker: %v\n%s", err, out)
	}
	return bin
}

type workerProcess struct {
	cmd  *exec.Cmd
	done chan error
	log  string
}

// startWorkerProcess runs the worker binary on c's names and waits until
// it consumes; it is stopped at cleanup, and its log shown on failure.
func startWorkerProcess(t *testing.T, bin string, c config.Common, name string) *workerProcess {
	t.Helper()
	w := &workerProcess{log: filepath.Join(t.TempDir(), name+".log"), done: make(chan error, 1)}
	logf, err := os.Create(w.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	w.cmd = exec.Command(bin)
	w.cmd.Stdout, w.cmd.Stderr = logf, logf
	w.cmd.Env = workerEnv(c)
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { w.done <- w.cmd.Wait() }()
	t.Cleanup(func() {
		_ = w.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-w.done:
		case <-time.After(30 * time.Second):
			_ = w.cmd.Process.Kill()
			<-w.done
		}
		if t.Failed() {
			out, _ := os.ReadFile(w.log)
			t.Logf("%s worker log:\n%s", name, out)
		}
	})
	conn := dlqConn(t, &pipeline{Cfg: c})
	testkit.WaitFor(t, name+" worker to consume", 30*time.Second, func() (bool, error) {
		select {
		case err := <-w.done:
			w.done <- err
			return false, fmt.Errorf("worker exited: %v", err)
		default:
		}
		_, consumers, err := queue.QueueDepth(context.Background(), conn, c.AMQP.Topology().Queue)
		return consumers > 0, err
	})
	return w
}

// kill sends SIGKILL: no drain, no ack of what is in flight.
func (w *workerProcess) kill(t *testing.T) {
	t.Helper()
	if err := w.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := <-w.done
	w.done <- err
}

func workerEnv(c config.Common) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SURGE_") {
			env = append(env, kv)
		}
	}
	delays := make([]string, len(c.AMQP.RetryDelays))
	for i, d := range c.AMQP.RetryDelays {
		delays[i] = d.String()
	}
	return append(env,
		"SURGE_REDIS_ADDRS="+strings.Join(c.Redis.Addrs, ","),
		"SURGE_REDIS_PASSWORD="+c.Redis.Password,
		"SURGE_AMQP_URL="+c.AMQP.URL,
		"SURGE_AMQP_EXCHANGE="+c.AMQP.Exchange,
		"SURGE_AMQP_QUEUE="+c.AMQP.Queue,
		"SURGE_AMQP_DEAD_QUEUE="+c.AMQP.DeadQueue,
		"SURGE_AMQP_RETRY_DELAYS="+strings.Join(delays, ","),
		"SURGE_MYSQL_DSN="+c.MySQL.DSN,
		"SURGE_WORKER_CONCURRENCY=2",
		"SURGE_WORKER_PREFETCH=32",
		"SURGE_WORKER_LOCK_TTL=2s",
		"SURGE_WORKER_METRICS_ADDR=",
		"SURGE_LOG_LEVEL=warn",
	)
}

// startChaosWorker runs an in-process worker with cfg until cleanup.
// privateMariaDB is a MariaDB server of the test's own, which it may
// pause without disturbing the shared server.
type privateMariaDB struct {
	port   int
	cmd    *exec.Cmd
	paused bool
}

func (m *privateMariaDB) dsn(name string) string {
	return fmt.Sprintf("root@tcp(127.0.0.1:%d)/%s", m.port, name)
}

func (m *privateMariaDB) pause(t *testing.T) {
	t.Helper()
	if err := m.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	m.paused = true
}

func (m *privateMariaDB) resume(t *testing.T) {
	t.Helper()
	if err := m.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	m.paused = false
}

// startPrivateMariaDB installs a data directory and runs mariadbd on a
// free port, root without a password; it is shut down at cleanup.
func startPrivateMariaDB(t *testing.T) *privateMariaDB {
	t.Helper()
	install, err1 := exec.LookPath("mariadb-install-db")
	server, err2 := exec.LookPath("mariadbd")
	if err2 != nil {
		server, err2 = exec.LookPath("/usr/sbin/mariadbd")
	}
	if err1 != nil || err2 != nil {
		msg := "mariadb-install-db and mariadbd are needed for a private MariaDB"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	// A short path: the socket path must fit in 108 bytes.
	dir, err := os.MkdirTemp("", "surge-mdb-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	out, err := exec.Command(install, "--no-defaults", "--datadir="+dir+"/data", "--user=root",
		"--auth-root-authentication-method=normal", "--skip-test-db").CombinedOutput()
	if err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	m := &privateMariaDB{port: freePort(t)}
	logf, err := os.Create(dir + "/server.log")
	if err != nil {
		t.Fatal(err)
	}
	m.cmd = exec.Command(server, "--no-defaults", "--datadir="+dir+"/data", "--user=root",
		fmt.Sprintf("--port=%d", m.port), "--bind-address=127.0.0.1", "--socket="+dir+"/sock",
		"--pid-file="+dir+"/pid", "--skip-log-bin", "--innodb-buffer-pool-size=64M", "--max-connections=200")
	m.cmd.Stdout, m.cmd.Stderr = logf, logf
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logf.Close()
	done := make(chan struct{})
	go func() { _ = m.cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		if m.paused {
			_ = m.cmd.Process.Signal(syscall.SIGCONT)
		}
		_ = m.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = m.cmd.Process.Kill()
			<-done
		}
	})
	testkit.WaitFor(t, "the private MariaDB to accept connections", 30*time.Second, func() (bool, error) {
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", m.port), time.Second)
		if err == nil {
			conn.Close()
		}
		return err == nil, err
	})
	return m
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
