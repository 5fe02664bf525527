package worker

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"surge/pkg/order"
)

// fixedLedger answers every order with res.
type fixedLedger struct{ res order.Processed }

func (l fixedLedger) Process(context.Context, order.Order, int64) (order.Processed, error) {
	return l.res, nil
}

// settleLog records the Redis scripts a Processor runs.
type settleLog struct{ calls []string }

func (s *settleLog) Commit(_ context.Context, sku, id string, qty int) (order.CommitOutcome, error) {
	s.calls = append(s.calls, "commit "+sku)
	return order.CommittedFromResv, nil
}

func (s *settleLog) Release(_ context.Context, sku, id string, mode order.ReleaseMode) (int, error) {
	s.calls = append(s.calls, "release "+sku+" "+string(mode))
	return 1, nil
}

// TestDuplicateSettlesWhatMySQLHolds: a delivery of an order MySQL already
// processed commits its reservation (a retry after a lost Redis step),
// unless MySQL holds that id for another request: then the message sold
// nothing, and its units (on its own SKU) go back.
func TestDuplicateSettlesWhatMySQLHolds(t *testing.T) {
	msg := order.Order{ID: "o_1", SKU: "mug", Qty: 2, CustomerID: "alice"}
	cases := []struct {
		name     string
		recorded order.Order
		want     string
		outcome  string
	}{
		{"same order", msg, "commit mug", OutcomeDuplicate},
		{"another sku", order.Order{ID: "o_1", SKU: "tee", Qty: 2, CustomerID: "alice"}, "release mug reject", OutcomeConflict},
		{"another qty", order.Order{ID: "o_1", SKU: "mug", Qty: 1, CustomerID: "alice"}, "release mug reject", OutcomeConflict},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			settled := &settleLog{}
			p := New(Processor{
				Ledger: fixedLedger{order.Processed{Status: order.StatusInvoiced, Duplicate: true, Recorded: c.recorded}},
				Stock:  settled, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			})
			d := &recorder{o: msg}
			outcome, _, err := p.handle(context.Background(), d)
			if err != nil || d.settle != "ack" || outcome != c.outcome {
				t.Fatalf("outcome %s settle %s err %v, want %s and ack", outcome, d.settle, err, c.outcome)
			}
			if len(settled.calls) != 1 || settled.calls[0] != c.want {
				t.Fatalf("redis calls %v, want [%s]", settled.calls, c.want)
			}
		})
	}
}

// latencies records what a LatencyObserver is told.
type latencies struct{ invoiced []time.Duration }

func (l *latencies) Begin(ctx context.Context, _ Step, _ order.Order) context.Context { return ctx }
func (l *latencies) End(context.Context, Step, order.Order, Result)                   {}
func (l *latencies) Observe(string, time.Duration)                                    {}
func (l *latencies) Invoiced(d time.Duration)                                         { l.invoiced = append(l.invoiced, d) }

// TestAcceptedToInvoicedLatency: an invoiced order reports how long it
// took from its acceptance at the gateway.
func TestAcceptedToInvoicedLatency(t *testing.T) {
	obs := &latencies{}
	p := New(Processor{Ledger: fixedLedger{order.Processed{Status: order.StatusInvoiced}}, Stock: &settleLog{},
		Observer: obs, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	o := order.Order{ID: "o_1", SKU: "mug", Qty: 1, CustomerID: "alice", AcceptedAtMs: time.Now().Add(-2 * time.Second).UnixMilli()}
	p.Handle(context.Background(), &recorder{o: o})
	if len(obs.invoiced) != 1 || obs.invoiced[0] < 2*time.Second || obs.invoiced[0] > 10*time.Second {
		t.Fatalf("latencies %v, want one of about 2s", obs.invoiced)
	}
}
