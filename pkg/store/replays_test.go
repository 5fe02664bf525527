package store

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestLastReplays(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	before := time.Now().Add(-time.Minute)
	for _, r := range [][4]string{
		{"dl-1", "o-1", "alice", "replayed"},
		{"dl-2", "o-2", "bob", "discarded"},
		{"dl-1", "o-1", "carol", "already_invoiced"},
	} {
		if err := s.RecordReplay(ctx, r[0], r[1], r[2], r[3]); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.LastReplays(ctx, []string{"dl-1", "dl-2", "dl-3"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]ReplayRecord{
		"dl-1": {DeadLetterID: "dl-1", OrderID: "o-1", Actor: "carol", Outcome: "already_invoiced"},
		"dl-2": {DeadLetterID: "dl-2", OrderID: "o-2", Actor: "bob", Outcome: "discarded"},
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(ReplayRecord{}, "At")); diff != "" {
		t.Errorf("last replays (-want +got):\n%s", diff)
	}
	if at := got["dl-1"].At; at.Before(before) {
		t.Errorf("recorded at %v, want a time of this test", at)
	}
	if none, err := s.LastReplays(ctx, nil); err != nil || len(none) != 0 {
		t.Errorf("no ids = %v, %v", none, err)
	}
}
