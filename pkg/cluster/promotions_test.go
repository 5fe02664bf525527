package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// slotMap is a cluster's slot map with one master per range.
func slotMap(masters ...string) []redis.ClusterSlot {
	var slots []redis.ClusterSlot
	for i, m := range masters {
		slots = append(slots, redis.ClusterSlot{Start: i * 100, End: i*100 + 99,
			Nodes: []redis.ClusterNode{{Addr: m}, {Addr: m + "-replica"}}})
	}
	return slots
}

// TestPromotionsRecentAfterATakeOver walks a failover: the first read's
// masters are established; a replica that takes over a range is recent
// for Window, then established; a master the client names before any read
// saw it is recent at once; a master that cannot be named is recent.
func TestPromotionsRecentAfterATakeOver(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1000, 0)
	current := slotMap("a", "b")
	master, masterErr := "a", error(nil)
	p := &Promotions{
		Slots:    func(context.Context) ([]redis.ClusterSlot, error) { return current, nil },
		MasterOf: func(context.Context, string) (string, error) { return master, masterErr },
		Window:   time.Minute,
		Now:      func() time.Time { return now },
	}
	if p.Recent(ctx, "k") {
		t.Fatal("recent before any read of the masters")
	}
	if err := p.Look(ctx); err != nil {
		t.Fatal(err)
	}
	if p.Recent(ctx, "k") {
		t.Fatal("a master of the first read is recent")
	}
	master = "c" // the client reloaded its slot map before the next read
	if !p.Recent(ctx, "k") {
		t.Fatal("a master no read has seen is not recent")
	}
	current = slotMap("c", "b")
	now = now.Add(time.Second)
	if err := p.Look(ctx); err != nil {
		t.Fatal(err)
	}
	now = now.Add(59 * time.Second)
	if !p.Recent(ctx, "k") {
		t.Fatal("a master that took over 59s ago is not recent (window 1m)")
	}
	now = now.Add(time.Second)
	if p.Recent(ctx, "k") {
		t.Fatal("a master that took over a window ago is still recent")
	}
	master = "b"
	if p.Recent(ctx, "k") {
		t.Fatal("the other shard's established master is recent")
	}
	master, masterErr = "", errors.New("cluster down")
	if !p.Recent(ctx, "k") {
		t.Fatal("a master that cannot be named is not recent")
	}
}

// TestPromotionsFailedReadKeepsWhatWasSeen: a read that fails changes
// nothing, and the next one still dates a new master from when it is seen.
func TestPromotionsFailedReadKeepsWhatWasSeen(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1000, 0)
	current, readErr := slotMap("a"), error(nil)
	p := &Promotions{
		Slots: func(context.Context) ([]redis.ClusterSlot, error) { return current, readErr },
		MasterOf: func(context.Context, string) (string, error) {
			return current[0].Nodes[0].Addr, nil
		},
		Window: time.Minute,
		Now:    func() time.Time { return now },
	}
	if err := p.Look(ctx); err != nil {
		t.Fatal(err)
	}
	readErr = errors.New("node down")
	if err := p.Look(ctx); err == nil {
		t.Fatal("a failed read returned no error")
	}
	if p.Recent(ctx, "k") {
		t.Fatal("a failed read made the established master recent")
	}
	current, readErr = slotMap("b"), nil
	now = now.Add(time.Hour)
	if err := p.Look(ctx); err != nil {
		t.Fatal(err)
	}
	if !p.Recent(ctx, "k") {
		t.Fatal("a master first seen after a failed read is not recent")
	}
}
