package store

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRecordRepairAndReplay(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	found := map[string]int{"avail": 3, "sold": 5}
	changed := map[string]int{"sold": 6}
	if err := s.RecordRepair(ctx, "mug", found, changed, true); err != nil {
		t.Fatalf("RecordRepair: %v", err)
	}
	if err := s.RecordRepair(ctx, "mug", func() {}, nil, false); err == nil {
		t.Fatal("RecordRepair accepted a value JSON cannot encode")
	}
	type repair struct {
		SKU     string `db:"sku"`
		Found   string `db:"found"`
		Changed string `db:"changed"`
		DryRun  bool   `db:"dry_run"`
	}
	var repairs []repair
	if err := s.DB().SelectContext(ctx, &repairs, "SELECT sku, found, changed, dry_run FROM reconcile_repairs"); err != nil {
		t.Fatalf("read repairs: %v", err)
	}
	want := []repair{{SKU: "mug", Found: `{"avail":3,"sold":5}`, Changed: `{"sold":6}`, DryRun: true}}
	if diff := cmp.Diff(want, repairs); diff != "" {
		t.Fatalf("repairs (-want +got):\n%s", diff)
	}

	if err := s.RecordReplay(ctx, "dl-1", "o-1", "alice", "requeued"); err != nil {
		t.Fatalf("RecordReplay: %v", err)
	}
	var replays [][4]string
	rows, err := s.DB().QueryContext(ctx, "SELECT dead_letter_id, order_id, actor, outcome FROM dlq_replays")
	if err != nil {
		t.Fatalf("read replays: %v", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r [4]string
		if err := rows.Scan(&r[0], &r[1], &r[2], &r[3]); err != nil {
			t.Fatalf("scan replay: %v", err)
		}
		replays = append(replays, r)
	}
	if diff := cmp.Diff([][4]string{{"dl-1", "o-1", "alice", "requeued"}}, replays); diff != "" {
		t.Fatalf("replays (-want +got):\n%s", diff)
	}
}
