//go:build fleet

package fleet

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"surge/internal/testkit"
	"surge/pkg/cluster"
	"surge/pkg/stock"
	"surge/pkg/store"
)

// fleet is the running fleet as its clients see it.
type fleet struct {
	root    string            // the repository
	env     map[string]string // deploy/fleet.sh env
	url     string            // HAProxy
	clients []string          // the buyers' source addresses
	db      *store.Store
	redis   *cluster.Client
	stock   *stock.Stock
}

var (
	theFleet *fleet
	fleetErr error
	once     sync.Once
)

// getFleet reads the fleet's addresses and opens its engines. A fleet
// that is down fails the test: these tests only run under make test-fleet.
func getFleet(t *testing.T) *fleet {
	t.Helper()
	once.Do(func() { theFleet, fleetErr = openFleet() })
	if fleetErr != nil {
		t.Fatalf("the fleet is not up (make test-fleet brings it up): %v", fleetErr)
	}
	return theFleet
}

func openFleet() (*fleet, error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	f := &fleet{root: filepath.Clean(filepath.Join(wd, "..", "..")), env: map[string]string{}}
	out, err := exec.Command(filepath.Join(f.root, "deploy", "fleet.sh"), "env").Output()
	if err != nil {
		return nil, fmt.Errorf("deploy/fleet.sh env: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			f.env[k] = v
		}
	}
	f.url = f.env["SURGE_FLEET_URL"]
	f.clients = strings.Split(f.env["SURGE_FLEET_CLIENT_ADDRS"], ",")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if f.db, err = store.Open(ctx, f.env["SURGE_MYSQL_DSN"], store.Options{MaxOpenConns: 4}); err != nil {
		return nil, err
	}
	f.redis = cluster.New(cluster.Options{Addrs: strings.Split(f.env["SURGE_REDIS_ADDRS"], ","),
		Password: f.env["SURGE_REDIS_PASSWORD"], PoolSize: 4})
	if err := stock.LoadScripts(ctx, f.redis.ClusterClient); err != nil {
		return nil, err
	}
	f.stock = stock.New(f.redis.ClusterClient, stock.Options{})
	return f, nil
}

// sh runs deploy/fleet.sh with args and fails the test when it fails.
func (f *fleet) sh(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(f.root, "deploy", "fleet.sh"), args...)
	cmd.Dir = f.root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("deploy/fleet.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// try runs deploy/fleet.sh with args and returns its output and error:
// for the polls of a fault's effects, which run beside the sale, off the
// test's goroutine, and must not end the test.
func (f *fleet) try(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(f.root, "deploy", "fleet.sh"), args...)
	cmd.Dir = f.root
	out, err := cmd.Output()
	return strings.TrimSpace(string(out)), err
}

// healthy waits until the fleet is whole again (each test leaves it so).
func (f *fleet) healthy(t *testing.T) {
	t.Helper()
	f.sh(t, "wait-healthy")
}

// load puts units of a fresh SKU on sale through a gateway's admin
// listener (the load balancer serves only the public routes), the first
// that answers.
func (f *fleet) load(t *testing.T, sku string, units int) {
	t.Helper()
	body := fmt.Sprintf(`{"stock":%d,"name":"fleet","price_cents":100}`, units)
	var errs []string
	for _, admin := range strings.Split(f.env["SURGE_FLEET_ADMIN_URLS"], ",") {
		req, _ := http.NewRequest(http.MethodPut, admin+"/v1/admin/stock/"+sku, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+f.env["SURGE_FLEET_ADMIN_TOKEN"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return
		}
		errs = append(errs, fmt.Sprintf("%s: %d %s", admin, resp.StatusCode, b))
	}
	t.Fatalf("load %s: %s", sku, strings.Join(errs, "; "))
}

// ---- the sale -------------------------------------------------------------------------------

const (
	buyersPerAddr = 10
	pace          = 100 * time.Millisecond // between one buyer's purchases
	retryEvery    = 150 * time.Millisecond
	giveUpAfter   = 30 * time.Second // on one purchase still not final
	clientTimeout = 5 * time.Second
	saleLimit     = 60 * time.Second
)

// sale is what the buyers saw.
type sale struct {
	sku   string
	units int

	mu       sync.Mutex
	answers  map[string]int // by status (and code for a 503), or "network"
	accepted map[string]bool
	unknown  map[string]bool // purchases given up while their outcome was unknown
	final    []time.Time     // when each 202 or 409 came
	start    time.Time
	end      time.Time
}

type orderAnswer struct {
	OrderID string `json:"order_id"`
	Error   struct {
		Code    string `json:"code"`
		OrderID string `json:"order_id"`
	} `json:"error"`
}

// runSale sells units of sku through HAProxy to buyers on every client
// address until they see it sold out; fault runs alongside, from the
// sale's start, and the sale waits for it to return.
func (f *fleet) runSale(t *testing.T, sku string, units int, fault func()) *sale {
	t.Helper()
	f.load(t, sku, units)
	s := &sale{sku: sku, units: units, answers: map[string]int{}, accepted: map[string]bool{},
		unknown: map[string]bool{}, start: time.Now()}
	ctx, cancel := context.WithTimeout(context.Background(), saleLimit)
	defer cancel()
	var wg sync.WaitGroup
	for ai, addr := range f.clients {
		client := buyerClient(addr)
		for b := range buyersPerAddr {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.buyer(ctx, client, f.url, fmt.Sprintf("a%db%02d", ai, b))
			}()
		}
	}
	faultDone := make(chan struct{})
	go func() { defer close(faultDone); fault() }()
	wg.Wait()
	s.end = time.Now()
	<-faultDone
	return s
}

// buyerClient sends from addr, one of the buyers' addresses on the bridge.
func buyerClient(addr string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(addr)}, Timeout: 2 * time.Second}
	return &http.Client{Timeout: clientTimeout, Transport: &http.Transport{DialContext: d.DialContext,
		MaxIdleConnsPerHost: 4, IdleConnTimeout: 5 * time.Second}}
}

// buyer buys one unit after another, each with a fresh key, retrying the
// same key on answers that are not final, until the SKU is sold out.
func (s *sale) buyer(ctx context.Context, c *http.Client, url, name string) {
	// Customers are the sale's own: a key reused with another SKU is 422.
	tag := s.sku[max(0, len(s.sku)-12):]
	for n := 0; ctx.Err() == nil; n++ {
		customer := fmt.Sprintf("%s-%s-%05d", tag, name, n)
		if soldOut := s.purchase(ctx, c, url, customer); soldOut {
			return
		}
		time.Sleep(pace)
	}
}

func (s *sale) purchase(ctx context.Context, c *http.Client, url, customer string) (soldOut bool) {
	body := `{"sku":"` + s.sku + `","qty":1,"customer_id":"` + customer + `"}`
	first, maybe := time.Now(), ""
	for {
		status, ans := post(c, url, body, "k-"+customer)
		s.mu.Lock()
		s.answers[status]++
		switch status {
		case "202":
			s.accepted[ans.OrderID] = true
			s.final = append(s.final, time.Now())
		case "409":
			s.final = append(s.final, time.Now())
		}
		s.mu.Unlock()
		switch {
		case status == "202":
			return false
		case status == "409":
			return true
		case strings.HasPrefix(status, "4") && status != "429":
			return false // an unexpected refusal, counted in answers
		}
		if ans.Error.OrderID != "" {
			maybe = ans.Error.OrderID
		}
		if time.Since(first) > giveUpAfter || ctx.Err() != nil {
			if maybe != "" {
				s.mu.Lock()
				s.unknown[maybe] = true
				s.mu.Unlock()
			}
			return false
		}
		time.Sleep(retryEvery)
	}
}

// post sends one order and names its answer: "202", "409", "503
// unavailable", "503 outcome_unknown", "502", ... or "network".
func post(c *http.Client, url, body, key string) (string, orderAnswer) {
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/orders", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := c.Do(req)
	var ans orderAnswer
	if err != nil {
		return "network", ans
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(raw, &ans)
	status := fmt.Sprint(resp.StatusCode)
	if resp.StatusCode == http.StatusServiceUnavailable && ans.Error.Code != "" {
		status += " " + ans.Error.Code
	}
	return status, ans
}

// unavailable is the longest time, during the sale, with no final answer
// (202 or 409) to any buyer.
func (s *sale) unavailable() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := append([]time.Time{s.start}, s.final...)
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	var gap time.Duration
	for i := 1; i < len(ts); i++ {
		gap = max(gap, ts[i].Sub(ts[i-1]))
	}
	return gap
}

func (s *sale) answersCopy() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := make(map[string]int, len(s.answers))
	for k, n := range s.answers {
		c[k] = n
	}
	return c
}

func (s *sale) acceptedIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.accepted))
}

// ---- the checks -----------------------------------------------------------------------------

// drain waits until every 202 of the sale is final in MySQL, at most
// timeout, and returns the counts.
func (f *fleet) drain(t *testing.T, s *sale, timeout time.Duration) map[string]int {
	t.Helper()
	ids := s.acceptedIDs()
	deadline := time.Now().Add(timeout)
	for {
		c, err := testkit.OrderStatuses(context.Background(), f.db, ids)
		if err == nil && c["invoiced"]+c["rejected"] == len(ids) {
			return c
		}
		if time.Now().After(deadline) {
			if err != nil {
				t.Logf("reading MySQL: %v", err)
			}
			return c
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// reconcile runs the reconciler once on the database host until it finds
// the SKU consistent, and returns what it repaired on the way. It keeps
// trying past the reconcile lock's TTL (1 min): a run cut off from the
// lock's master during a partition cannot release it, and every run until
// the lease expires answers busy (exit 3).
func (f *fleet) reconcile(t *testing.T, sku string) []string {
	t.Helper()
	var repairs []string
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); {
		cmd := exec.Command(filepath.Join(f.root, "deploy", "fleet.sh"), "exec", "db",
			filepath.Join(f.root, "bin", "reconciler"), "once", "--detailed-exitcode", "--sku", sku)
		out, err := cmd.Output()
		code := 0
		if err != nil {
			ee, ok := err.(*exec.ExitError)
			if !ok {
				t.Fatalf("reconciler: %v", err)
			}
			code = ee.ExitCode()
		}
		switch code {
		case 0:
			return repairs
		case 1:
			repairs = append(repairs, strings.TrimSpace(string(out)))
		case 3:
		default:
			t.Fatalf("reconciler once --sku %s: exit %d\n%s", sku, code, out)
		}
		time.Sleep(time.Second)
	}
	t.Fatalf("reconciler never found %s consistent", sku)
	return nil
}

// check drains the sale, reconciles, checks it and prints its figures.
func (f *fleet) check(t *testing.T, s *sale, drainFor time.Duration) {
	t.Helper()
	ids := s.acceptedIDs()
	counts := f.drain(t, s, drainFor)
	repairs := f.reconcile(t, s.sku)
	counts, err := testkit.OrderStatuses(context.Background(), f.db, ids) // the reconciler may have settled more
	if err != nil {
		t.Fatal(err)
	}
	lost := len(ids) - counts["invoiced"] - counts["rejected"]

	var inv struct{ N, Units, Distinct int }
	if err := f.db.DB().QueryRow(`SELECT COUNT(*), COALESCE(SUM(qty), 0), COUNT(DISTINCT order_id)
		FROM invoices WHERE sku = ?`, s.sku).Scan(&inv.N, &inv.Units, &inv.Distinct); err != nil {
		t.Fatal(err)
	}
	prod, err := f.db.Product(context.Background(), s.sku)
	if err != nil {
		t.Fatal(err)
	}
	v, err := f.stock.View(context.Background(), s.sku)
	if err != nil {
		t.Fatal(err)
	}

	s.mu.Lock()
	var answers []string
	for k, n := range s.answers {
		answers = append(answers, fmt.Sprintf("%s: %d", k, n))
	}
	unknown := len(s.unknown)
	s.mu.Unlock()
	sort.Strings(answers)
	t.Logf("FIGURES %s: sale %.1fs, time unavailable %v, answers {%s}, 202s %d (invoiced %d, rejected %d), "+
		"orders lost %d, given up unknown %d, units invoiced %d of %d, reconciler repairs %d",
		t.Name(), s.end.Sub(s.start).Seconds(), s.unavailable().Round(time.Millisecond), strings.Join(answers, ", "),
		len(ids), counts["invoiced"], counts["rejected"], lost, unknown, inv.Units, s.units, len(repairs))
	for _, r := range repairs {
		t.Logf("reconciler: %s", r)
	}

	if lost != 0 {
		t.Errorf("orders lost: %d orders answered 202 are neither invoiced nor rejected", lost)
	}
	if inv.N != inv.Distinct {
		t.Errorf("%d invoices for %d orders: an order was invoiced twice", inv.N, inv.Distinct)
	}
	if inv.Units > s.units || prod.Sold > s.units {
		t.Errorf("oversold: %d units invoiced, products.sold %d, stock %d", inv.Units, prod.Sold, s.units)
	}
	if prod.Sold != inv.Units {
		t.Errorf("products.sold %d, invoices hold %d units", prod.Sold, inv.Units)
	}
	if !v.Consistent() || v.Sold != prod.Sold || v.Stock != s.units || v.Reserved != 0 {
		t.Errorf("Redis after reconcile: stock %d avail %d reserved %d sold %d; MySQL sold %d of %d",
			v.Stock, v.Avail, v.Reserved, v.Sold, prod.Sold, s.units)
	}
	for k, n := range s.answersCopy() {
		if strings.HasPrefix(k, "4") && k != "409" && k != "429" {
			t.Errorf("%d answers %s: a buyer's order was refused", n, k)
		}
	}
	if len(ids) == 0 || counts["invoiced"] == 0 {
		t.Errorf("the sale sold nothing")
	}
}

// within polls cond until it holds or timeout passes, and returns how
// long it took, or -1 when it never held: the scenarios use it to see
// their fault take effect.
func within(timeout time.Duration, cond func() bool) time.Duration {
	start := time.Now()
	for {
		if cond() {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			return -1
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// seen formats what within returned.
func seen(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return fmt.Sprintf("after %.1fs", d.Seconds())
}

// after runs fn d after start (the sale's start), returning at once when
// that moment has passed.
func after(start time.Time, d time.Duration) { time.Sleep(time.Until(start.Add(d))) }
