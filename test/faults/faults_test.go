//go:build faults

// Package faults is surge's randomized fault test, in the spirit of
// Jepsen (build tag "faults"). It starts private engines (a Redis Cluster
// on ports from 7200 up, a MariaDB and a RabbitMQ node of its own), runs
// the real gateway and worker binaries as subprocesses (each as its own
// uid where iptables and setpriv can be used, through a proxy per service
// to MySQL and to RabbitMQ), drives a flash sale of a few small SKUs from
// many concurrent buyers while a nemesis deals faults, one or two at once
// (nemesis_test.go lists the kinds: processes killed, terminated or
// paused, broker alarms and closed connections, blackholes, latency and
// resets between one program and one engine, abusive clients, operator
// actions), records every request and answer, then lets the pipeline
// drain, runs `reconciler once`, buys every SKU out and checks the history
// against MySQL, Redis and the dead letters (checker_test.go lists the
// checks). A failing run keeps its history as JSON lines in
// /tmp/surge-faults-failed/<seed>/ (SURGE_FAULTS_FAILED_DIR), which
// TestReplayHistory checks again with SURGE_FAULTS_HISTORY=<file>.
//
//	go test -tags faults -count=1 -v -timeout 20m ./test/faults/
//
// SURGE_FAULTS_PROFILE is ci (the default: the reconciler's grace 20s,
// retry tiers 200ms/1s/3s, the worker's lock TTL 3s, MariaDB paused 20s
// at most, the gateways' failover doubt 30s, a sale of 60s) or production
// (surge's defaults: grace 5m, tiers 1s/10s/60s, lock TTL 10s, MariaDB
// paused up to 90s, failover doubt 3m to outlast that pause, a sale of
// 30m; make test-faults-long). SURGE_FAULTS_DURATION (the profile's) is the length
// of the sale, SURGE_FAULTS_SEED replays a run (the seed is printed at its
// start), SURGE_FAULTS_RUNS (1) runs several seeds in a row,
// SURGE_FAULTS_KEEP=1 keeps the temporary directory (logs, history.jsonl)
// instead of removing it, and SURGE_FAULTS_KINDS (every kind) names the
// faults to draw from, separated by commas.
package faults

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// bins is the directory holding the programs built by TestMain.
var bins string

// programs are the services the test runs as subprocesses.
var programs = []string{"gateway", "worker", "reconciler", "opsctl"}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "surge-faults-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		os.Exit(1)
	}
	bins = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// buildOnce builds the programs the first time a test needs them.
var buildOnce = sync.OnceValue(func() error { return buildPrograms(bins) })

func buildPrograms(dir string) error {
	root, err := filepath.Abs("../..")
	if err != nil {
		return err
	}
	for _, p := range programs {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, p), "./services/"+p)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build ./services/%s: %w\n%s", p, err, out)
		}
	}
	return nil
}

// settings are the SURGE_FAULTS_ variables.
type settings struct {
	profile  profile
	duration time.Duration
	seeds    []int64
	keep     bool
	kinds    []faultKind
}

// profile is the programs' settings a run uses: CI shortens the
// reconciler's grace, the retry tiers and the worker's lock TTL so that a
// run fits in a few minutes; production keeps surge's defaults.
type profile struct {
	name          string
	maxMySQLPause time.Duration // the longest MariaDB pause
	grace         time.Duration // SURGE_RECONCILE_GRACE
	tiers         string        // SURGE_AMQP_RETRY_DELAYS
	lockTTL       time.Duration // SURGE_WORKER_LOCK_TTL
	doubt         time.Duration // SURGE_FAILOVER_DOUBT: past the longest MariaDB pause and the tiers
	duration      time.Duration // the sale, unless SURGE_FAULTS_DURATION
}

var profiles = map[string]profile{
	"ci":         {name: "ci", maxMySQLPause: 20 * time.Second, grace: 20 * time.Second, tiers: "200ms,1s,3s", lockTTL: 3 * time.Second, doubt: 30 * time.Second, duration: 60 * time.Second},
	"production": {name: "production", maxMySQLPause: 90 * time.Second, grace: 5 * time.Minute, tiers: "1s,10s,60s", lockTTL: 10 * time.Second, doubt: 3 * time.Minute, duration: 30 * time.Minute},
}

func readSettings(t *testing.T) settings {
	t.Helper()
	name := os.Getenv("SURGE_FAULTS_PROFILE")
	if name == "" {
		name = "ci"
	}
	pr, ok := profiles[name]
	if !ok {
		t.Fatalf("SURGE_FAULTS_PROFILE=%q: want ci or production", name)
	}
	s := settings{profile: pr, duration: pr.duration, keep: os.Getenv("SURGE_FAULTS_KEEP") != ""}
	if v := os.Getenv("SURGE_FAULTS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 10*time.Second {
			t.Fatalf("SURGE_FAULTS_DURATION=%q: want a duration of at least 10s", v)
		}
		s.duration = d
	}
	runs := 1
	if v := os.Getenv("SURGE_FAULTS_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("SURGE_FAULTS_RUNS=%q: want a positive integer", v)
		}
		runs = n
	}
	seed := time.Now().UnixNano() % 1_000_000_000
	if v := os.Getenv("SURGE_FAULTS_SEED"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("SURGE_FAULTS_SEED=%q: want an integer", v)
		}
		seed = n
	}
	for i := range runs {
		s.seeds = append(s.seeds, seed+int64(i)*7919)
	}
	if v := os.Getenv("SURGE_FAULTS_KINDS"); v != "" {
		for name := range strings.SplitSeq(v, ",") {
			k := faultKind(strings.TrimSpace(name))
			if !slices.Contains(faultKinds, k) {
				t.Fatalf("SURGE_FAULTS_KINDS=%q: no fault kind %q; want some of %v", v, k, faultKinds)
			}
			s.kinds = append(s.kinds, k)
		}
	}
	return s
}

// TestFaults runs one sale under faults per seed, on engines shared by
// the runs (each run has its own database, queues, SKUs and customers).
func TestFaults(t *testing.T) {
	st := readSettings(t)
	if err := buildOnce(); err != nil {
		t.Fatal(err)
	}
	eng := startEngines(t, st.keep)
	st.kinds = dealable(t, st.kinds, eng.fw != nil)
	for i, seed := range st.seeds {
		// A run past go test's -timeout would end the binary without any
		// cleanup, leaving the private engines running.
		if d, ok := t.Deadline(); ok && time.Until(d) < st.duration+st.profile.grace+4*time.Minute {
			t.Errorf("not enough time left before -timeout for seed %d and the runs after it; raise -timeout", seed)
			return
		}
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			runOnce(t, eng, i+1, seed, st)
		})
	}
}

// dealable is the kinds a run draws from: those asked for, or every kind;
// the blackholes only where the firewall could be set up. Asked for by
// name, or with CI set, a blackhole that cannot be dealt fails the test.
func dealable(t *testing.T, asked []faultKind, firewall bool) []faultKind {
	kinds := asked
	if len(kinds) == 0 {
		kinds = faultKinds
	}
	if firewall {
		return kinds
	}
	var out []faultKind
	for _, k := range kinds {
		if !slices.Contains(blackholes, k) {
			out = append(out, k)
			continue
		}
		if len(asked) > 0 || os.Getenv("CI") != "" {
			t.Fatalf("fault kind %s cannot be dealt: %v", k, firewallErr)
		}
	}
	if len(out) < len(kinds) {
		t.Logf("SKIPPING the blackhole kinds %v: %v", blackholes, firewallErr)
	}
	return out
}
