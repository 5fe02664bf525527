package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"surge/tools/benchreport"
	"surge/tools/ceiling"
)

func TestParsePIDsAndPairs(t *testing.T) {
	got, err := parsePIDs("gateway=12,worker=34")
	if err != nil || got["gateway"] != 12 || got["worker"] != 34 || len(got) != 2 {
		t.Fatalf("parsePIDs = %v, %v", got, err)
	}
	if got, err := parsePIDs(""); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("parsePIDs(\"\") = %v, %v: want an empty map to add to", got, err)
	}
	for _, bad := range []string{"gateway", "=1", "gateway=x", "a=1,b"} {
		if _, err := parsePIDs(bad); err == nil {
			t.Errorf("parsePIDs(%q) accepted", bad)
		}
	}
}

func TestUnknownCommandsAreRefused(t *testing.T) {
	var out, errOut bytes.Buffer
	for _, args := range [][]string{nil, {"fly"}, {"raw"}, {"raw", "disk"}, {"run"}} {
		if err := run(context.Background(), args, &out, &errOut); err == nil {
			t.Errorf("loadgen %q succeeded", args)
		}
	}
}

func TestResetRefusesTheDefaultNames(t *testing.T) {
	for _, v := range []string{"SURGE_AMQP_EXCHANGE", "SURGE_AMQP_QUEUE", "SURGE_AMQP_DEAD_QUEUE"} {
		t.Setenv(v, "") // the defaults, whatever this environment says
	}
	t.Setenv("SURGE_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/surge")
	if err := run(context.Background(), []string{"reset"}, &bytes.Buffer{}, &bytes.Buffer{}); err == nil ||
		!strings.Contains(err.Error(), "refusing") {
		t.Fatalf("reset of database surge: %v, want a refusal", err)
	}
	t.Setenv("SURGE_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/surge_bench_t")
	if err := run(context.Background(), []string{"reset"}, &bytes.Buffer{}, &bytes.Buffer{}); err == nil ||
		!strings.Contains(err.Error(), "refusing") {
		t.Fatalf("reset of the default queues: %v, want a refusal", err)
	}
}

func TestReportWritesResultsTableAndPlot(t *testing.T) {
	dir := t.TempDir()
	raw, _ := json.Marshal(ceiling.Result{Name: "amqp_confirmed_publish", PerSec: 1234})
	if err := os.WriteFile(filepath.Join(dir, benchreport.FileRawAMQP), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	// No scenario part: the report still writes what it has, but there is
	// no latency to plot.
	err := run(context.Background(), []string{"report", "-dir", dir}, &out, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "latency") {
		t.Fatalf("report without scenarios: %v, want the plot to be refused", err)
	}
	res, rerr := os.ReadFile(filepath.Join(dir, "results.json"))
	if rerr != nil || !strings.Contains(string(res), `"amqp_confirmed_publish_per_s": 1234`) {
		t.Fatalf("results.json: %v\n%s", rerr, res)
	}
	if !strings.Contains(out.String(), "1,234/s") {
		t.Fatalf("table lacks the ceiling:\n%s", out.String())
	}
}

func TestVersion(t *testing.T) {
	t.Setenv("SURGE_IDEMPOTENCY_TTL", "forever") // --version reads no configuration
	var out bytes.Buffer
	if err := run(context.Background(), []string{"--version"}, &out, &out); err != nil ||
		!strings.HasPrefix(out.String(), "loadgen version ") {
		t.Fatalf("--version: %v, %q", err, &out)
	}
}

// floor-server answers orders sold out until its context ends, then
// returns without an error.
func TestFloorServerAnswersSoldOutUntilStopped(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"floor-server", "-addr", addr}, &bytes.Buffer{}, &bytes.Buffer{}) }()
	body := `{"sku":"s","qty":1,"customer_id":"c"}`
	var resp *http.Response
	for range 100 {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/orders", strings.NewReader(body))
		req.Header.Set("Idempotency-Key", "k1")
		if resp, err = http.DefaultClient.Do(req); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("floor-server never answered: %v", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Errorf("floor-server answered %d, want 409", resp.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("floor-server stopped with %v", err)
	}
}
