package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
	"golang.org/x/term"

	"surge/pkg/cluster"
	"surge/pkg/queue"
	"surge/pkg/store"
	"surge/tools/loadgen"
)

// loadFlags are the flags of loadgen run.
type loadFlags struct {
	url, adminURL, sku, label, runID, queue, pids, jsonOut string
	profiles, profileDir, customer                         string
	profileSeconds                                         int
	qty, stock, maxPerCustomer                             int
	opts                                                   loadgen.Options
	check, stockView, redisAudit, quiet                    bool
	sample, drainTimeout, redisSettle                      time.Duration
}

func parseLoadFlags(cfg loadgenConfig, args []string, stderr io.Writer) (loadFlags, error) {
	var f loadFlags
	fs := flag.NewFlagSet("loadgen run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.url, "url", "http://"+cfg.HTTPAddr, "server to load (default from SURGE_HTTP_ADDR)")
	fs.StringVar(&f.adminURL, "admin-url", "http://"+cfg.AdminAddr, "its admin API, for -stock and -stock-view (default from SURGE_ADMIN_ADDR)")
	fs.StringVar(&f.sku, "sku", "", "SKU to order (required)")
	fs.IntVar(&f.qty, "qty", 1, "units per order")
	fs.IntVar(&f.stock, "stock", -1, "load this stock through the admin API first (-1: leave it)")
	fs.IntVar(&f.maxPerCustomer, "max-per-customer", 0, "with -stock, load it with this purchase limit per customer (0: none)")
	fs.StringVar(&f.label, "label", "load", "scenario name in the report")
	fs.StringVar(&f.customer, "customer", "", "send every order as this one customer, each under a new key (default: a new customer per order)")
	fs.StringVar(&f.runID, "run-id", "", "prefix of customer ids (default: a new ULID, unique per run)")
	fs.IntVar(&f.opts.Concurrency, "c", 64, "concurrency: requests in flight (closed loop), most in flight (open loop)")
	fs.Int64Var(&f.opts.Requests, "n", 0, "stop after this many requests")
	fs.DurationVar(&f.opts.Duration, "d", 0, "stop after this long")
	fs.Float64Var(&f.opts.Rate, "rate", 0, "open loop: start this many requests per second (needs -d)")
	fs.DurationVar(&f.opts.Timeout, "timeout", 10*time.Second, "per-request timeout")
	fs.BoolVar(&f.check, "check", false, "wait for the invoices, then check the books in MySQL (SURGE_MYSQL_DSN)")
	fs.BoolVar(&f.stockView, "stock-view", true, "with -check, also check the admin API's Redis view")
	fs.StringVar(&f.queue, "queue", "", "work queue whose depth is sampled and drained (e.g. $SURGE_AMQP_QUEUE)")
	fs.DurationVar(&f.sample, "sample", 0, "record a time series at this interval (0: none)")
	fs.DurationVar(&f.drainTimeout, "drain-timeout", time.Minute, "longest wait for the last invoice")
	fs.StringVar(&f.pids, "pids", "", "name=pid,... whose peak RSS is read after the load")
	fs.BoolVar(&f.redisAudit, "redis", false, "measure Redis used_memory around the run and audit the records it left")
	fs.DurationVar(&f.redisSettle, "redis-settle", 3*time.Second, "with -redis, wait this long before the last reading (short-lived keys expire)")
	fs.StringVar(&f.profiles, "cpuprofile", "", "name=pprof base URL,... profiled from the start of the load")
	fs.StringVar(&f.profileDir, "cpuprofile-dir", ".", "directory for <name>.cpu.pb.gz")
	fs.IntVar(&f.profileSeconds, "cpuprofile-seconds", 0, "profile length (default: -d, or 5s)")
	fs.StringVar(&f.jsonOut, "json", "", "write the report as JSON to this file ('-': stdout)")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress bar")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if f.sku == "" {
		return f, fmt.Errorf("run: -sku is required")
	}
	if f.customer != "" && f.check {
		return f, fmt.Errorf("run: -check expects one order per customer; leave out -customer or -check")
	}
	if f.runID == "" {
		f.runID = "lg" + strings.ToLower(ulid.Make().String())
	}
	return f, nil
}

func runLoad(ctx context.Context, cfg loadgenConfig, args []string, stdout, stderr io.Writer) error {
	f, err := parseLoadFlags(cfg, args, stderr)
	if err != nil {
		return err
	}
	client := loadgen.NewHTTPClient(4)
	url := strings.TrimSuffix(f.url, "/")
	sc := loadgen.Scenario{
		Label:   f.label,
		Options: f.opts,
		Orders: loadgen.NewOrders(loadgen.Orders{Client: loadgen.NewOrderClient(max(f.opts.Concurrency, 1)), BaseURL: url, SKU: f.sku,
			Qty: f.qty, RunID: f.runID, OneCustomer: f.customer, Start: time.Now(), TTL: cfg.IdempotencyTTL}),
		Stock:          f.stock,
		MaxPerCustomer: f.maxPerCustomer,
		StockAPI:       loadgen.StockAPI{Client: client, BaseURL: strings.TrimSuffix(f.adminURL, "/"), Token: cfg.AdminToken},
		StockView:      f.stockView,
		DrainTimeout:   f.drainTimeout,
		SampleEvery:    f.sample,
		RedisSettle:    f.redisSettle,
	}
	if sc.Processes, err = parsePIDs(f.pids); err != nil {
		return err
	}
	// The generator's own share of the CPU it shares with the servers.
	sc.Processes["loadgen"] = os.Getpid()
	if sc.Profiles, err = parseProfiles(f); err != nil {
		return err
	}
	if !f.quiet && isTerminal(stderr) {
		sc.Progress = stderr
	}
	closeAll, err := wireEngines(ctx, cfg, f, &sc)
	defer closeAll()
	if err != nil {
		return err
	}
	rep, err := sc.Run(ctx)
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, rep.String())
	if err := writeJSON(f.jsonOut, rep, stdout); err != nil {
		return err
	}
	if rep.Check != nil && !rep.Check.OK {
		return fmt.Errorf("%s: correctness check failed", f.label)
	}
	return nil
}

// wireEngines opens what the scenario's options need: MySQL for -check,
// RabbitMQ for -queue, Redis for -redis.
func wireEngines(ctx context.Context, cfg loadgenConfig, f loadFlags, sc *loadgen.Scenario) (closeAll func(), err error) {
	var closers []func()
	closeAll = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	if f.check || f.sample > 0 {
		db, err := store.Open(ctx, cfg.MySQL.DSN, store.Options{MaxOpenConns: 4})
		if err != nil {
			return closeAll, err
		}
		closers = append(closers, func() { _ = db.Close() })
		sc.Ledger = &loadgen.Ledger{DB: db.DB().DB}
		sc.Check = f.check
	}
	if f.queue != "" {
		conn, err := queue.Dial(ctx, cfg.AMQP.URL, queue.DialOptions{Name: "surge-loadgen"})
		if err != nil {
			return closeAll, fmt.Errorf("rabbitmq: %w", err)
		}
		closers = append(closers, func() { _ = conn.Close() })
		sc.QueueDepth = func(ctx context.Context) (int64, error) {
			n, _, err := queue.QueueDepth(ctx, conn, f.queue)
			return int64(n), err
		}
	}
	if f.redisAudit {
		rdb := cluster.New(cfg.Redis.Options())
		closers = append(closers, func() { _ = rdb.Close() })
		sc.Redis = rdb.ClusterClient
	}
	return closeAll, nil
}

func parsePIDs(s string) (map[string]int, error) {
	out := map[string]int{}
	pairs, err := parsePairs("-pids", s)
	if err != nil {
		return nil, err
	}
	for name, v := range pairs {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("-pids: %s=%q is not a pid", name, v)
		}
		out[name] = n
	}
	return out, nil
}

func parseProfiles(f loadFlags) (loadgen.CPUProfiles, error) {
	urls, err := parsePairs("-cpuprofile", f.profiles)
	if err != nil {
		return loadgen.CPUProfiles{}, err
	}
	secs := f.profileSeconds
	if secs == 0 {
		secs = max(int(f.opts.Duration.Seconds()), 5)
	}
	return loadgen.CPUProfiles{URLs: urls, Dir: f.profileDir, Seconds: secs}, nil
}

// parsePairs reads "name=value,..." (empty: none).
func parsePairs(flagName, s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	out := map[string]string{}
	for part := range strings.SplitSeq(s, ",") {
		name, v, ok := strings.Cut(part, "=")
		if !ok || name == "" || v == "" {
			return nil, fmt.Errorf("%s: want name=value,... got %q", flagName, part)
		}
		out[name] = v
	}
	return out, nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// writeJSON writes v to path, or to stdout for "-"; "" writes nothing.
func writeJSON(path string, v any, stdout io.Writer) error {
	if path == "" {
		return nil
	}
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	raw = append(raw, '\n')
	if path == "-" {
		_, err = stdout.Write(raw)
		return err
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}
