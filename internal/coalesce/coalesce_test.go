package coalesce_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"surge/internal/coalesce"
)

// 8 keys, 2,000 values each, added from 64 goroutines at once: every value
// is sent exactly once, under its own key, in batches of at most the
// limit; a key's sends never overlap; values sent while a send was in
// flight went together (far fewer sends than values).
func TestEveryValueSentOnceInBatchesPerKey(t *testing.T) {
	const keys, each, limit = 8, 2000, 50
	var (
		mu       sync.Mutex
		seen     = map[string]int{}
		sends    atomic.Int64
		inFlight [keys]atomic.Int32
		overlaps atomic.Int32
		tooBig   atomic.Int32
		wg       sync.WaitGroup
	)
	var sent sync.WaitGroup
	sent.Add(keys * each)
	c := coalesce.New(limit, func(key string, batch []string) {
		var k int
		fmt.Sscanf(key, "k%d", &k)
		if inFlight[k].Add(1) != 1 {
			overlaps.Add(1)
		}
		sends.Add(1)
		if len(batch) > limit {
			tooBig.Add(1)
		}
		time.Sleep(200 * time.Microsecond) // a round trip
		mu.Lock()
		for _, v := range batch {
			seen[key+"/"+v]++
		}
		mu.Unlock()
		inFlight[k].Add(-1)
		for range batch {
			sent.Done()
		}
	})
	var next atomic.Int64
	for range 64 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < keys*each; i = int(next.Add(1)) - 1 {
				c.Add(fmt.Sprint("k", i%keys), fmt.Sprint(i))
			}
		})
	}
	wg.Wait()
	sent.Wait()
	if overlaps.Load() != 0 || tooBig.Load() != 0 {
		t.Fatalf("%d overlapping sends of one key, %d batches over %d", overlaps.Load(), tooBig.Load(), limit)
	}
	if len(seen) != keys*each {
		t.Fatalf("%d distinct values sent, want %d", len(seen), keys*each)
	}
	for v, n := range seen {
		if n != 1 {
			t.Fatalf("value %s sent %d times", v, n)
		}
	}
	if s := sends.Load(); s > keys*each/4 {
		t.Fatalf("%d sends for %d values, want them batched", s, keys*each)
	}
}

// A limit below one still sends, one value at a time.
func TestLimitBelowOneSendsOneAtATime(t *testing.T) {
	got := make(chan int, 3)
	c := coalesce.New(0, func(_ string, batch []int) { got <- len(batch) })
	c.Add("k", 1)
	if n := <-got; n != 1 {
		t.Fatalf("batch of %d, want 1", n)
	}
}
