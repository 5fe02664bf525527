package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/oklog/ulid/v2"
	amqp "github.com/rabbitmq/amqp091-go"

	"surge/internal/testenv"
	"surge/internal/testkit"
	"surge/pkg/admin"
	"surge/pkg/config"
	"surge/pkg/order"
	"surge/pkg/queue"
)

// dlqSetup points opsctl at a fresh topology and database and parks two
// letters: an order for an unknown SKU and a body that is not an order.
func dlqSetup(t *testing.T) (orderLetter, junkLetter string, o order.Order) {
	t.Helper()
	url, dsn := testenv.AMQPURL(t), testenv.MySQLDSN(t)
	name := testenv.Unique("t.opsctl.")
	for k, v := range map[string]string{"SURGE_AMQP_URL": url, "SURGE_MYSQL_DSN": dsn, "SURGE_AMQP_EXCHANGE": name,
		"SURGE_AMQP_QUEUE": name + ".created", "SURGE_AMQP_DEAD_QUEUE": name + ".dead", "SURGE_OPERATOR": "alice"} {
		t.Setenv(k, v)
	}
	var c config.Common
	if err := config.Load(&c); err != nil {
		t.Fatal(err)
	}
	topo := c.AMQP.Topology()
	ctx := context.Background()
	conn, err := queue.Dial(ctx, url, queue.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := topo.Declare(ch); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = topo.Delete(ch); _ = ch.Close() })
	testkit.OpenStore(t, dsn) // the schema opsctl reads
	pub, err := queue.NewPublisher(conn, topo, queue.PublisherOptions{Channels: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	park := func(msgID string, body []byte, reason string) string {
		id := ulid.Make().String()
		now := time.Now().UTC().Format(time.RFC3339Nano)
		msg := amqp.Publishing{MessageId: msgID, DeliveryMode: amqp.Persistent, Body: body,
			Headers: amqp.Table{queue.HeaderDeadID: id, queue.HeaderReason: reason, queue.HeaderAttempts: int32(1),
				queue.HeaderFirstFailure: now, queue.HeaderLastFailure: now, queue.HeaderLastError: "boom"}}
		if err := pub.PublishRaw(ctx, topo.DeadExchange, topo.RoutingKey, msg); err != nil {
			t.Fatal(err)
		}
		return id
	}
	sku := testenv.Unique("cli-")
	o = order.Order{ID: order.IDFor(sku, "k", 0), SKU: sku, Qty: 2, CustomerID: sku}
	body, _ := json.Marshal(o)
	return park(o.ID, body, order.ReasonUnknownSKU), park("", []byte("garbage"), order.ReasonMalformed), o
}

func opsctl(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestDLQCommands(t *testing.T) {
	letter, junk, o := dlqSetup(t)

	code, out, _ := opsctl("dlq", "list")
	if code != exitOK || !strings.Contains(out, letter) || !strings.Contains(out, o.ID) ||
		!strings.Contains(out, order.ReasonUnknownSKU) || !strings.Contains(out, "2 dead letters") {
		t.Fatalf("dlq list: exit %d\n%s", code, out)
	}
	code, out, _ = opsctl("dlq", "list", "--json")
	var letters []admin.Letter
	if err := json.Unmarshal([]byte(out), &letters); code != exitOK || err != nil {
		t.Fatalf("dlq list --json: exit %d, %v\n%s", code, err, out)
	}
	if got := []string{letters[0].ID, letters[1].ID}; !cmp.Equal(got, []string{letter, junk}) {
		t.Errorf("listed %v, want %v in parking order", got, []string{letter, junk})
	}
	if code, out, _ = opsctl("dlq", "show", junk); code != exitOK || !strings.Contains(out, `"garbage"`) {
		t.Errorf("dlq show: exit %d\n%s", code, out)
	}

	code, out, _ = opsctl("dlq", "replay", "--all", "--dry-run")
	if code != exitOK || !strings.Contains(out, "dry run") || !strings.Contains(out, "would_replay") ||
		!strings.Contains(out, "skipped_malformed") {
		t.Errorf("dry run: exit %d\n%s", code, out)
	}
	code, out, _ = opsctl("dlq", "replay", letter, "--json")
	var rep admin.LetterReport
	if err := json.Unmarshal([]byte(out), &rep); code != exitOK || err != nil {
		t.Fatalf("replay: exit %d, %v\n%s", code, err, out)
	}
	if rep.Actor != "alice" || len(rep.Items) != 1 || rep.Items[0].Outcome != admin.OutcomeReplayed {
		t.Errorf("replay report %+v", rep)
	}
	if code, out, _ = opsctl("dlq", "replay", letter); code != exitOK || !strings.Contains(out, "already_replayed") {
		t.Errorf("second replay: exit %d\n%s", code, out)
	}
	if code, out, _ = opsctl("dlq", "discard", junk); code != exitOK || !strings.Contains(out, "discarded") {
		t.Errorf("discard: exit %d\n%s", code, out)
	}
	if code, out, _ = opsctl("dlq", "list"); code != exitOK || !strings.Contains(out, "no dead letters") {
		t.Errorf("list after replay and discard: exit %d\n%s", code, out)
	}
	if code, out, _ = opsctl("dlq", "discarded"); code != exitOK || !strings.Contains(out, junk) {
		t.Errorf("discarded: exit %d, want %s kept\n%s", code, junk, out)
	}
	if code, out, _ = opsctl("dlq", "restore", junk); code != exitOK || !strings.Contains(out, "restored") {
		t.Errorf("restore: exit %d\n%s", code, out)
	}
	if code, out, _ = opsctl("dlq", "list"); code != exitOK || !strings.Contains(out, junk) {
		t.Errorf("list after restore: exit %d, want %s parked again\n%s", code, junk, out)
	}
}

// TestDLQMistakes: each mistake gets its exit code and a message on
// stderr that names the problem.
func TestDLQMistakes(t *testing.T) {
	letter, junk, _ := dlqSetup(t)
	tests := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no action", []string{"dlq"}, exitUsage, "want list, show, replay, discard, discarded or restore"},
		{"unknown action", []string{"dlq", "purge"}, exitUsage, `unknown action "purge"`},
		{"unknown flag", []string{"dlq", "list", "--all"}, exitUsage, "unknown flag: --all"},
		{"replay without selection", []string{"dlq", "replay"}, exitUsage, "say what to replay"},
		{"ids and --all", []string{"dlq", "replay", letter, "--all"}, exitUsage, "not both"},
		{"bad --since", []string{"dlq", "replay", "--since", "yesterday"}, exitUsage, "RFC 3339"},
		{"replay a body that is not an order", []string{"dlq", "replay", junk}, exitUsage, "discard it"},
		{"show without id", []string{"dlq", "show"}, exitUsage, "exactly one"},
		{"discard without id", []string{"dlq", "discard"}, exitUsage, "name the dead letters"},
		{"unknown id", []string{"dlq", "replay", letter, "01NOSUCHID"}, exitNotFound, "01NOSUCHID"},
		{"show unknown id", []string{"dlq", "show", "01NOSUCHID"}, exitNotFound, "not parked"},
		{"discard unknown id", []string{"dlq", "discard", "01NOSUCHID"}, exitNotFound, "01NOSUCHID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := opsctl(tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.msg) {
				t.Errorf("exit %d, stderr %q; want exit %d mentioning %q", code, stderr, tt.code, tt.msg)
			}
		})
	}
	if code, out, _ := opsctl("dlq", "list", "--json"); code != exitOK || !strings.Contains(out, letter) || !strings.Contains(out, junk) {
		t.Errorf("the mistakes changed the dead queue: exit %d\n%s", code, out)
	}
}

func TestDLQBrokerDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there now
	t.Setenv("SURGE_AMQP_URL", "amqp://guest:guest@"+addr+"/")
	code, _, stderr := opsctl("dlq", "list")
	if code != exitUnavailable || !strings.Contains(stderr, "rabbitmq") || !strings.Contains(stderr, "unavailable") {
		t.Errorf("broker down: exit %d, stderr %q; want exit 3 naming rabbitmq", code, stderr)
	}
}
