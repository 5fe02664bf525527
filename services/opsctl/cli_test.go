package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"surge/internal/testenv"
	"surge/internal/testkit"
	"surge/pkg/admin"
	"surge/pkg/order"
	"surge/pkg/reconcile"
)

// engineAddr points every engine variable at addr.
func engineAddr(t *testing.T, addr string) {
	t.Helper()
	t.Setenv("SURGE_MYSQL_DSN", "root@tcp("+addr+")/surge")
	t.Setenv("SURGE_REDIS_ADDRS", addr)
	t.Setenv("SURGE_AMQP_URL", "amqp://guest:guest@"+addr+"/")
	t.Setenv("SURGE_OPERATOR", "alice")
}

// closedPort is a local address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// usageMistakes are command lines opsctl must refuse as such (exit 2)
// without reaching any engine, with what the message must say.
var usageMistakes = []struct {
	args []string
	msg  string
}{
	{[]string{"stock", "load", "SKU"}, "--stock N is required"},
	{[]string{"stock", "load", "SKU", "--stock", "5", "--jsn"}, "unknown flag: --jsn"},
	{[]string{"stock", "load", "SKU", "--stock", "-1"}, "stock must be an integer between 0 and"},
	{[]string{"stock", "load", "SKU", "--stock", "five"}, `invalid argument "five" for "--stock"`},
	{[]string{"stock", "load", "no spaces", "--stock", "5"}, "sku may contain only"},
	{[]string{"stock", "load", "--stock", "5"}, "SKU is required"},
	{[]string{"stock", "show"}, "SKU is required"},
	{[]string{"stock", "show", "a", "b"}, "one SKU, got 2 arguments"},
	{[]string{"stock"}, "want load or show"},
	{[]string{"stock", "lod", "SKU"}, `did you mean "load"`},
	{[]string{"stok", "show", "SKU"}, "Did you mean this?\n\tstock"},
	{[]string{"--jsn"}, "unknown flag: --jsn"},
	{[]string{"help", "nosuch"}, `unknown command "nosuch"`},
	{[]string{"dlq", "replay"}, "say what to replay"},
	{[]string{"dlq", "replay", "ID", "--all"}, "not both"},
	{[]string{"dlq", "replay", "--since", "yesterday"}, "RFC 3339"},
	{[]string{"dlq", "show"}, "exactly one"},
	{[]string{"dlq", "purge"}, `unknown action "purge"`},
	{[]string{"reconcile", "SKU"}, "name SKUs with --sku"},
	{[]string{"reconcile", "--sku", "no spaces"}, "sku"},
	{[]string{"migrate", "now"}, "migrate takes no arguments"},
	{[]string{"preflight", "--jsn"}, "unknown flag: --jsn"},
	{[]string{"exporter", "--adr", "x"}, "unknown flag: --adr"},
	{[]string{"completion"}, "want bash, zsh, fish or powershell"},
	{[]string{"completion", "bsh"}, `did you mean "bash"`},
}

// TestUsageErrorsWithEnginesDown: with every engine variable pointing at
// a closed port, each mistake exits 2 with a message naming it on stderr
// and nothing on stdout; with --json, stdout is one parseable error of
// code "usage". A right command line then fails on the engines: exit 3,
// code "unavailable".
func TestUsageErrorsWithEnginesDown(t *testing.T) {
	engineAddr(t, closedPort(t))
	for _, m := range usageMistakes {
		code, out, stderr := opsctl(m.args...)
		if code != exitUsage || !strings.Contains(stderr, m.msg) || out != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 saying %q", m.args, code, out, stderr, m.msg)
		}
		code, out, _ = opsctl(append(m.args, "--json")...)
		if e := jsonErr(t, out); code != exitUsage || e.Code != "usage" && e.Code != "invalid" || !strings.Contains(e.Message, m.msg) {
			t.Errorf("%q --json: exit %d, stdout %q; want exit 2 and a JSON usage error saying %q", m.args, code, out, m.msg)
		}
	}
	code, out, stderr := opsctl("stock", "load", "SKU", "--stock", "5", "--json")
	if e := jsonErr(t, out); code != exitUnavailable || e.Code != "unavailable" || !strings.Contains(stderr, "mysql") {
		t.Errorf("engines down: exit %d, stdout %q, stderr %q; want exit 3, code unavailable, naming mysql", code, out, stderr)
	}
	code, out, _ = opsctl("dlq", "list", "--json")
	if e := jsonErr(t, out); code != exitUnavailable || e.Code != "unavailable" || !strings.Contains(e.Message, "RabbitMQ") {
		t.Errorf("broker down: exit %d, stdout %q; want exit 3, code unavailable, naming RabbitMQ", code, out)
	}
}

// TestUsageErrorsDialNothing: the mistakes are refused before any engine
// is dialled: a listener standing in for every engine sees no connection.
func TestUsageErrorsDialNothing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var dials atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			dials.Add(1)
			_ = c.Close()
		}
	}()
	engineAddr(t, ln.Addr().String())
	for _, m := range usageMistakes {
		if code, _, _ := opsctl(m.args...); code != exitUsage {
			t.Errorf("%q: exit %d, want 2", m.args, code)
		}
	}
	if n := dials.Load(); n != 0 {
		t.Fatalf("the usage mistakes dialled the engines %d times", n)
	}
	// The stand-in does see a right command line.
	opsctl("stock", "show", "SKU")
	if dials.Load() == 0 {
		t.Fatal("stock show dialled nothing: the listener does not stand for the engines")
	}
}

func jsonErr(t *testing.T, out string) jsonError {
	t.Helper()
	var doc struct{ Error jsonError }
	dec := json.NewDecoder(strings.NewReader(out))
	if err := dec.Decode(&doc); err != nil {
		t.Errorf("stdout %q is not a JSON error: %v", out, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Errorf("stdout %q holds more than one JSON document", out)
	}
	return doc.Error
}

// TestCompletion: each shell gets its script on stdout, exit 0, without
// the configuration (a broken one here); the script's completion request
// lists the commands and dlq replay's reasons.
func TestCompletion(t *testing.T) {
	t.Setenv("SURGE_IDEMPOTENCY_TTL", "forever")
	for shell, marker := range map[string]string{"bash": "bash completion V2 for opsctl", "zsh": "#compdef opsctl",
		"fish": "fish completion for opsctl", "powershell": "powershell completion for opsctl"} {
		code, out, stderr := opsctl("completion", shell)
		if code != exitOK || stderr != "" || !strings.Contains(out, marker) {
			t.Errorf("completion %s: exit %d, stderr %q, %d bytes without %q", shell, code, stderr, len(out), marker)
		}
	}
	if code, out, _ := opsctl("__complete", "st"); code != exitOK || !strings.HasPrefix(out, "stock\t") {
		t.Errorf("completing st: exit %d\n%s", code, out)
	}
	if code, out, _ := opsctl("__complete", "dlq", "replay", "--reason", ""); code != exitOK ||
		!strings.Contains(out, "unknown_sku\n") || !strings.Contains(out, "retries_exhausted\n") {
		t.Errorf("completing --reason: exit %d\n%s", code, out)
	}
	if code, out, _ := opsctl("help"); code != exitOK || !strings.Contains(out, "completion") {
		t.Errorf("help does not list completion: exit %d\n%s", code, out)
	}
}

// TestSingleDashFlags: Go's flag package took -json and -stock 5; they
// keep working as --json and --stock.
func TestSingleDashFlags(t *testing.T) {
	engineAddr(t, closedPort(t))
	code, out, _ := opsctl("stock", "load", "SKU", "-stock", "5", "-json")
	if e := jsonErr(t, out); code != exitUnavailable || e.Code != "unavailable" {
		t.Errorf("-stock 5 -json: exit %d, stdout %q; want it read as --stock 5 --json", code, out)
	}
}

// TestRefusesOlderSchema: on a database whose schema is one version
// behind the build, the commands that read MySQL exit 1 naming both
// versions and the fix, under --json too; migrate brings it up to date
// and the command then runs.
func TestRefusesOlderSchema(t *testing.T) {
	dsn := testenv.MySQLDSN(t)
	testenv.Redis(t)
	redisAddrs := strings.Join(testenv.RedisAddrs(), ",")
	latest := testkit.LatestMigration(t)
	testkit.StoreAtVersion(t, dsn, latest-1)
	engineAddr(t, closedPort(t))
	t.Setenv("SURGE_MYSQL_DSN", dsn)
	code, _, stderr := opsctl("stock", "show", "SKU")
	want := fmt.Sprintf("mysql schema is at version %d, this build needs version %d: run `opsctl migrate`", latest-1, latest)
	if code != exitFailed || !strings.Contains(stderr, want) {
		t.Fatalf("stock show on schema %d: exit %d, stderr %q; want exit 1 saying %q", latest-1, code, stderr, want)
	}
	code, out, _ := opsctl("stock", "show", "SKU", "--json")
	if e := jsonErr(t, out); code != exitFailed || e.Code != "schema_behind" || !strings.Contains(e.Message, want) {
		t.Errorf("stock show --json on schema %d: exit %d, stdout %q", latest-1, code, out)
	}
	// reconcile keeps its own codes: a run that cannot start fails, 2.
	closed := os.Getenv("SURGE_REDIS_ADDRS")
	t.Setenv("SURGE_REDIS_ADDRS", redisAddrs)
	t.Setenv("SURGE_REDIS_PASSWORD", testenv.RedisPassword())
	code, out, _ = opsctl("reconcile", "--json")
	if e := jsonErr(t, out); code != reconcile.ExitFailed || e.Code != "schema_behind" || !strings.Contains(e.Message, want) {
		t.Errorf("reconcile --json on schema %d: exit %d, stdout %q; want exit 2, code schema_behind", latest-1, code, out)
	}
	t.Setenv("SURGE_REDIS_ADDRS", closed)
	if code, out, stderr := opsctl("migrate", "--json"); code != exitOK || out != fmt.Sprintf("{\n  \"latest\": %d,\n  \"version\": %d\n}\n", latest, latest) {
		t.Fatalf("migrate --json: exit %d, %q %q", code, out, stderr)
	}
	// Past the schema check, stock show goes on to Redis, which is down here.
	if code, _, stderr := opsctl("stock", "show", "SKU"); code != exitUnavailable || !strings.Contains(stderr, "redis") {
		t.Errorf("stock show after migrate: exit %d, %q; want it past MySQL, exit 3 on Redis", code, stderr)
	}
}

// TestReportWithFailure: a report that comes with a failure (a replay
// that lost the broker midway) is one JSON document, the report's fields
// and the failure under "error", and opsctl prints no second document.
func TestReportWithFailure(t *testing.T) {
	var out, errb bytes.Buffer
	e := &env{out: &out}
	rep := admin.LetterReport{Action: "replay", Actor: "alice", Items: []admin.LetterItem{{ID: "01X", Outcome: admin.OutcomeReplayed}}}
	lost := fmt.Errorf("rabbitmq: %w: connection lost", order.ErrUnavailable)
	err := e.printJSONResult(rep, lost)
	code := report(nil, ranError{err}, true, &out, &errb)
	var doc struct {
		Actor string
		Items []admin.LetterItem `json:"results"`
		Error jsonError
	}
	dec := json.NewDecoder(&out)
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("stdout is not JSON: %v", err)
	}
	if dec.More() {
		t.Error("stdout holds a second JSON document")
	}
	if code != exitUnavailable || doc.Actor != "alice" || len(doc.Items) != 1 || doc.Error.Code != "unavailable" ||
		!strings.Contains(doc.Error.Message, "connection lost") || !strings.Contains(errb.String(), "connection lost") {
		t.Errorf("exit %d, document %+v, stderr %q", code, doc, &errb)
	}
}
