package cache_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"surge/internal/testenv"
	"surge/pkg/cache"
)

// OnGet hears each Get as a hit or a miss, and OnRebuild each loader run:
// nil for a value or an unknown id, the loader's error otherwise.
func TestObserversHearGetsAndRebuilds(t *testing.T) {
	rdb := testenv.Redis(t)
	ns := namespace(t, rdb, "a", "nope", "bad")
	var mu sync.Mutex
	var gets []bool
	var rebuilds []error
	opts := cache.Options{
		OnGet:     func(hit bool) { mu.Lock(); gets = append(gets, hit); mu.Unlock() },
		OnRebuild: func(err error) { mu.Lock(); rebuilds = append(rebuilds, err); mu.Unlock() },
	}
	ctx := context.Background()
	boom := errors.New("mysql down")
	good, missing, bad := newSource("v", 0), newSource("", 0), newSource("", 0)
	missing.err = fmt.Errorf("read: %w", cache.ErrNotFound)
	bad.err = boom
	c := newCache(t, rdb, ns, good, opts)
	for range 2 {
		if _, err := c.Get(ctx, "a"); err != nil {
			t.Fatal(err)
		}
	}
	_, _ = newCache(t, rdb, ns, missing, opts).Get(ctx, "nope")
	_, _ = newCache(t, rdb, ns, bad, opts).Get(ctx, "bad")

	mu.Lock()
	defer mu.Unlock()
	if want := []bool{false, true, false, false}; !slices.Equal(gets, want) {
		t.Errorf("OnGet heard %v, want %v (miss, hit, miss, miss)", gets, want)
	}
	if len(rebuilds) != 3 || rebuilds[0] != nil || rebuilds[1] != nil || !errors.Is(rebuilds[2], boom) {
		t.Errorf("OnRebuild heard %v, want [nil nil %v]", rebuilds, boom)
	}
}
