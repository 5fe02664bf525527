package worker

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"surge/pkg/order"
)

// recorder is a Delivery that remembers how it was settled.
type recorder struct {
	o      order.Order
	bad    error
	settle string
	reason string
}

func (r *recorder) Order() (order.Order, error) { return r.o, r.bad }
func (r *recorder) Ack() error                  { r.settle = "ack"; return nil }
func (r *recorder) Retry(error) error           { r.settle = "retry"; return nil }
func (r *recorder) Dead(reason string, _ error) error {
	r.settle, r.reason = "dead", reason
	return nil
}

// failingLedger fails every order with err, after waiting for ctx when
// hang is set (an engine that stopped answering).
type failingLedger struct {
	err  error
	hang bool
}

func (l failingLedger) Process(ctx context.Context, o order.Order, _ int64) (order.Processed, error) {
	if l.hang {
		<-ctx.Done()
		return order.Processed{}, fmt.Errorf("process order %s: %w", o.ID, ctx.Err())
	}
	if l.err != nil {
		return order.Processed{}, fmt.Errorf("process order %s: %w", o.ID, l.err)
	}
	return order.Processed{Status: order.StatusInvoiced}, nil
}

type noStock struct{}

func (noStock) Commit(context.Context, string, string, int) (order.CommitOutcome, error) {
	return 0, nil
}
func (noStock) Release(context.Context, string, string, order.ReleaseMode) (int, error) {
	return 0, nil
}

// TestClassification: what the issue asks of each kind of failure. Only
// failures that can be pinned on the order itself are parked at once;
// anything an engine outage can cause is retried through the tiers.
func TestClassification(t *testing.T) {
	netErr := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	tests := []struct {
		name       string
		bad        error
		err        error
		hang       bool
		wantSettle string
		wantReason string
	}{
		{"processed", nil, nil, false, "ack", ""},
		{"malformed message", order.Invalid("qty is required"), nil, false, "dead", order.ReasonMalformed},
		{"unknown sku", nil, order.ErrUnknownSKU, false, "dead", order.ReasonUnknownSKU},
		{"stale fence is a late duplicate", nil, order.ErrStaleFence, false, "ack", ""},
		{"deadlock", nil, &mysql.MySQLError{Number: 1213, Message: "Deadlock found"}, false, "retry", ""},
		{"lock wait timeout", nil, &mysql.MySQLError{Number: 1205}, false, "retry", ""},
		{"mysql unreachable", nil, netErr, false, "retry", ""},
		{"mysql connection lost", nil, driver.ErrBadConn, false, "retry", ""},
		{"mysql stopped answering", nil, nil, true, "retry", ""},
		{"missing table (a deployment problem)", nil, &mysql.MySQLError{Number: 1146}, false, "retry", ""},
		{"redis cluster down", nil, errors.New("CLUSTERDOWN The cluster is down"), false, "retry", ""},
		{"lock busy", nil, errors.New("lock order:o_1: lock not obtained"), false, "retry", ""},
		{"a value MySQL refuses (it fails the whole batch)", nil, &mysql.MySQLError{Number: 1406}, false, "retry", ""},
		{"invalid order refused by the store", nil, order.Invalid("sku is required"), false, "dead", order.ReasonMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := New(Processor{Ledger: failingLedger{err: tt.err, hang: tt.hang}, Stock: noStock{},
				Timeout: 20 * time.Millisecond, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
			d := &recorder{o: order.Order{ID: order.IDFor("c", "k", 0), SKU: "s", Qty: 1, CustomerID: "c"}, bad: tt.bad}
			p.Handle(context.Background(), d)
			if d.settle != tt.wantSettle || d.reason != tt.wantReason {
				t.Errorf("settled %q reason %q, want %q reason %q", d.settle, d.reason, tt.wantSettle, tt.wantReason)
			}
		})
	}
}
