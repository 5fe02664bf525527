package stock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"surge/internal/testenv"
	"surge/lua"
	"surge/pkg/keys"
	"surge/pkg/stock"
)

// The tests below drive lua/reserve.lua and lua/release.lua with chosen
// nonces, as the network delivers them: the gateway's Reserve call timed
// out, the gateway undid it, and a copy of that very call (the same nonce,
// TCP retransmitting it or go-redis resending it) reaches Redis afterwards.

// scripts runs the reserve and undo scripts of one order as pkg/stock
// sends them, with the nonce chosen by the test.
type scripts struct {
	t   *testing.T
	st  *stock.Stock
	rdb *redis.ClusterClient
	sku string
	id  string
}

func newScripts(t *testing.T, total int) scripts {
	t.Helper()
	st, sku := setup(t, total)
	return scripts{t: t, st: st, rdb: testenv.Redis(t), sku: sku, id: ord(sku, 1, 1).ID}
}

func (s scripts) keys() []string {
	return []string{keys.Avail(s.sku), keys.Resv(s.sku), keys.OrderState(s.sku, s.id), keys.Undone(s.sku, s.id),
		keys.MaxPerCustomer(s.sku), keys.CustomerUnits(s.sku, "c")}
}

// reserve sends reserve.lua for 1 unit with nonce; newClaim says whether
// the request's idempotency claim made a new record. It returns the code.
func (s scripts) reserve(nonce string, newClaim bool) int64 {
	s.t.Helper()
	c := "0"
	if newClaim {
		c = "1"
	}
	res, err := lua.Reserve.Run(context.Background(), s.rdb, s.keys(), s.id, 1, nonce, "c", 3600, c).Int64Slice()
	if err != nil {
		s.t.Fatalf("reserve nonce=%s: %v", nonce, err)
	}
	return res[0]
}

// undo sends release.lua in mode undo for nonce and returns its reply.
func (s scripts) undo(nonce string) int64 {
	s.t.Helper()
	n, err := lua.Release.Run(context.Background(), s.rdb, s.keys(), s.id, "undo", 3600, nonce, 60).Int64()
	if err != nil {
		s.t.Fatalf("undo nonce=%s: %v", nonce, err)
	}
	return n
}

// held is the order's reservation, "" when it holds none.
func (s scripts) held() string {
	s.t.Helper()
	v, err := s.rdb.HGet(context.Background(), keys.Resv(s.sku), s.id).Result()
	if errors.Is(err, redis.Nil) {
		return ""
	}
	if err != nil {
		s.t.Fatal(err)
	}
	return v
}

func (s scripts) state() string {
	s.t.Helper()
	v, err := s.rdb.Get(context.Background(), keys.OrderState(s.sku, s.id)).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		s.t.Fatal(err)
	}
	return v
}

// codeUndoneCall is reserve.lua's answer to a call the gateway undid.
const codeUndoneCall = 5

// TestLateReserveAfterUndoThatFoundNothing is the lost-and-late case: the
// reserve timed out before it ran, the undo found nothing, the request was
// answered not taken, and then the reserve arrived.
func TestLateReserveAfterUndoThatFoundNothing(t *testing.T) {
	s := newScripts(t, 3)
	if n := s.undo("aaaa0001"); n != 0 {
		t.Fatalf("undo of a reserve that never ran: %d, want 0", n)
	}
	if code := s.reserve("aaaa0001", true); code != codeUndoneCall {
		t.Errorf("late reserve of the undone call: code %d, want %d (refused)", code, codeUndoneCall)
	}
	if h := s.held(); h != "" {
		t.Errorf("the order answered not taken holds %q", h)
	}
	if v := mustView(t, s.st, s.sku); v.Avail != 3 {
		t.Errorf("avail %d, want 3", v.Avail)
	}
}

// TestRetryAfterUndoThatFoundNothing: a retry already past its claim when
// the first request undid (and found nothing) is not taken either.
func TestRetryAfterUndoThatFoundNothing(t *testing.T) {
	s := newScripts(t, 3)
	s.undo("aaaa0001")
	if st := s.state(); st != "U" {
		t.Errorf("state after an undo that found nothing: %q, want U", st)
	}
	if code := s.reserve("bbbb0002", false); code != 4 {
		t.Errorf("retry after the undo: code %d, want 4 (undone)", code)
	}
	if h := s.held(); h != "" {
		t.Errorf("the order answered not taken holds %q", h)
	}
}

// TestLateReserveAfterUndoThatReleased: the reserve ran, the undo
// released it, and a copy of the same call arrives afterwards.
func TestLateReserveAfterUndoThatReleased(t *testing.T) {
	s := newScripts(t, 3)
	if code := s.reserve("aaaa0001", true); code != 1 {
		t.Fatalf("reserve: code %d", code)
	}
	if n := s.undo("aaaa0001"); n != 1 {
		t.Fatalf("undo: %d, want 1 released", n)
	}
	if code := s.reserve("aaaa0001", true); code != codeUndoneCall {
		t.Errorf("late copy of the undone call: code %d, want %d (refused)", code, codeUndoneCall)
	}
	if h := s.held(); h != "" {
		t.Errorf("the order answered not taken holds %q", h)
	}
}

// TestEveryUndoneCallStaysUndone: request 1 undone, request 2 (a new
// claim of the same order id, the key reused after the 503) reserves as
// usual and is undone too, then copies of both calls arrive.
func TestEveryUndoneCallStaysUndone(t *testing.T) {
	s := newScripts(t, 3)
	s.undo("aaaa0001") // request 1's reserve has not run yet
	if code := s.reserve("bbbb0002", true); code != 1 {
		t.Fatalf("a new claim after the undo: code %d, want 1 (reserved as usual)", code)
	}
	if n := s.undo("bbbb0002"); n != 1 {
		t.Fatalf("undo request 2: %d, want 1", n)
	}
	for _, nonce := range []string{"aaaa0001", "bbbb0002"} {
		if code := s.reserve(nonce, true); code != codeUndoneCall {
			t.Errorf("late copy of %s: code %d, want %d", nonce, code, codeUndoneCall)
		}
	}
	if h := s.held(); h != "" {
		t.Errorf("the order answered not taken twice holds %q", h)
	}
	if code := s.reserve("cccc0003", true); code != 1 {
		t.Errorf("a third new claim: code %d, want 1 (reserved as usual)", code)
	}
}

// TestLateCopyLeavesANewClaimUndoable: a copy of request 1's undone call
// arriving while request 2 holds the order changes nothing, so request 2
// can still undo its own reservation.
func TestLateCopyLeavesANewClaimUndoable(t *testing.T) {
	s := newScripts(t, 3)
	s.undo("aaaa0001")
	if code := s.reserve("bbbb0002", true); code != 1 {
		t.Fatalf("new claim: code %d", code)
	}
	if code := s.reserve("aaaa0001", true); code != codeUndoneCall {
		t.Errorf("late copy of request 1: code %d, want %d", code, codeUndoneCall)
	}
	if st := s.state(); st != "A" {
		t.Errorf("state %q after the late copy, want A (request 2's)", st)
	}
	if n := s.undo("bbbb0002"); n != 1 {
		t.Errorf("undo request 2: %d, want 1", n)
	}
}

// TestSameCallRepeatedKeepsItsReservation: go-redis resends a timed-out
// EVALSHA with the same nonce. The copy finds the reservation its own call
// made: that is no other request that may have published the order, so
// the state stays A and the call can still undo it.
func TestSameCallRepeatedKeepsItsReservation(t *testing.T) {
	s := newScripts(t, 3)
	if code := s.reserve("aaaa0001", true); code != 1 {
		t.Fatalf("reserve: code %d", code)
	}
	if code := s.reserve("aaaa0001", true); code != 1 {
		t.Errorf("the same call again: code %d, want 1 (its own reservation)", code)
	}
	if st := s.state(); st != "A" {
		t.Errorf("state %q after the same call again, want A", st)
	}
	if n := s.undo("aaaa0001"); n != 1 {
		t.Errorf("undo after the same call again: %d, want 1 released", n)
	}
	if v := mustView(t, s.st, s.sku); v.Avail != 3 || v.Reserved != 0 {
		t.Errorf("view %+v, want every unit back", v)
	}
	// Another request's repeat still marks the order as possibly published.
	if code := s.reserve("bbbb0002", true); code != 1 {
		t.Fatalf("new claim: code %d", code)
	}
	if code := s.reserve("cccc0003", false); code != 2 {
		t.Errorf("another request's repeat: code %d, want 2", code)
	}
	if n := s.undo("bbbb0002"); n != -2 {
		t.Errorf("undo after another request's repeat: %d, want -2 (not yours)", n)
	}
}

// TestUndoneMarkOutlivesTheUState: the mark that refuses an undone call
// lasts as long as the order state may (the idempotency window), far past
// the minute of state U and the quarter of an hour TCP may take to give up
// on a segment (Linux tcp_retries2).
func TestUndoneMarkOutlivesTheUState(t *testing.T) {
	s := newScripts(t, 3)
	s.undo("aaaa0001")
	if err := s.rdb.Del(context.Background(), keys.OrderState(s.sku, s.id)).Err(); err != nil {
		t.Fatal(err)
	}
	if code := s.reserve("aaaa0001", true); code != codeUndoneCall {
		t.Errorf("late copy after U expired: code %d, want %d", code, codeUndoneCall)
	}
	ttl, err := s.rdb.TTL(context.Background(), keys.Undone(s.sku, s.id)).Result()
	if err != nil || ttl.Seconds() < 3000 {
		t.Errorf("undone mark TTL %v (%v), want the state TTL (3600s)", ttl, err)
	}
}
