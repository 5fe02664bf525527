package store

import (
	"context"
	"testing"
	"time"
)

// TestAuditReads: the console's reads page the audit logs newest first,
// name who acted, and list SKUs by their last load.
func TestAuditReads(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	seed(t, s, "mug", 5, 100)
	time.Sleep(5 * time.Millisecond)
	seed(t, s, "cup", 5, 100)
	time.Sleep(5 * time.Millisecond)
	if _, err := s.SetStock(ctx, "mug", 7, nil, nil); err != nil {
		t.Fatal(err)
	}
	ps, err := s.RecentProducts(ctx, "", 10)
	if err != nil || len(ps) != 2 || ps[0].SKU != "mug" || ps[1].SKU != "cup" {
		t.Fatalf("recent products = %+v, %v; want mug (loaded last), then cup", ps, err)
	}
	if ps, err := s.RecentProducts(ctx, "cu", 10); err != nil || len(ps) != 1 || ps[0].SKU != "cup" {
		t.Errorf("search cu = %+v, %v", ps, err)
	}

	if err := s.RecordRepair(ctx, "mug", map[string]int{}, map[string]int{}, false); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordRepairBy(ctx, "mug", map[string]int{"sold": 1}, map[string]int{}, true, "dana"); err != nil {
		t.Fatal(err)
	}
	reps, err := s.Repairs(ctx, AuditQuery{Limit: 10, SKU: "mug"})
	if err != nil || len(reps) != 2 || reps[0].Actor != "dana" || !reps[0].DryRun || reps[1].Actor != "" {
		t.Fatalf("repairs = %+v, %v; want dana's dry run, then the schedule's", reps, err)
	}
	if older, err := s.Repairs(ctx, AuditQuery{Limit: 10, Before: reps[0].ID}); err != nil || len(older) != 1 || older[0].ID != reps[1].ID {
		t.Errorf("repairs before %d = %+v, %v", reps[0].ID, older, err)
	}

	for i, actor := range []string{"alice", "bob", "carol"} {
		if err := s.RecordReplay(ctx, "dl-"+actor, "o-1", actor, []string{"replayed", "discarded", "restored"}[i]); err != nil {
			t.Fatal(err)
		}
	}
	page, err := s.Replays(ctx, AuditQuery{Limit: 2, OrderID: "o-1"})
	if err != nil || len(page) != 2 || page[0].Actor != "carol" || page[1].Actor != "bob" {
		t.Fatalf("replays page 1 = %+v, %v", page, err)
	}
	page, err = s.Replays(ctx, AuditQuery{Limit: 2, Before: page[1].ID})
	if err != nil || len(page) != 1 || page[0].Actor != "alice" || page[0].Outcome != "replayed" {
		t.Fatalf("replays page 2 = %+v, %v", page, err)
	}
}
