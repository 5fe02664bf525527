//go:build chaos

package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"surge/internal/apitest"
)

// clientTimeout is far above anything a request should take: an attempt
// that reaches it hung, which the tests count as a failure.
const clientTimeout = 20 * time.Second

// apiClient is the tests' HTTP client: every request and answer is
// validated against api/openapi.yaml, and what does not conform fails t.
func apiClient(t testing.TB) *http.Client {
	return &http.Client{Timeout: clientTimeout, Transport: apitest.Transport(t, nil)}
}

// sale sends orders of one unit for one SKU from several clients. Like a
// checkout frontend, a client retries an order with the same
// Idempotency-Key after a 503 or a transport error. Every attempt is
// recorded.
type sale struct {
	url, sku string
	client   *http.Client
	next     atomic.Int64

	mu         sync.Mutex
	attempts   []attempt
	accepted   map[string]bool // order ids answered 202
	soldOut    int
	hung       int
	unexpected []string
}

type attempt struct {
	sent, done time.Time
	status     int // 0: transport error
}

func newSale(t testing.TB, url, sku string) *sale {
	return &sale{url: url, sku: sku, accepted: map[string]bool{}, client: apiClient(t)}
}

// start runs clients until the returned stop is called; stop waits for
// the orders in flight to be answered.
func (s *sale) start(clients int, pace time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				s.order(ctx, int(s.next.Add(1)))
				select {
				case <-ctx.Done():
				case <-time.After(pace):
				}
			}
		})
	}
	var once sync.Once
	return func() { once.Do(func() { cancel(); wg.Wait() }) }
}

// order places order n, retrying while the gateway answers 503, until it
// is accepted or refused, or the sale stops.
func (s *sale) order(ctx context.Context, n int) {
	customer := fmt.Sprintf("c%d-%s", n, s.sku) // idempotency records outlive a test
	body := fmt.Sprintf(`{"sku":%q,"qty":1,"customer_id":%q}`, s.sku, customer)
	for ctx.Err() == nil {
		// The request is not tied to ctx: stopping the sale must not cut an
		// answer off (a 202 the test never saw would go unchecked).
		req, _ := http.NewRequest(http.MethodPost, s.url+"/v1/orders", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "chaos-key")
		a := attempt{sent: time.Now()}
		resp, err := s.client.Do(req)
		a.done = time.Now()
		var payload []byte
		if err == nil {
			a.status = resp.StatusCode
			payload, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		if s.record(a, err, payload) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// record notes one attempt and reports whether the order is settled.
func (s *sale) record(a attempt, err error, payload []byte) (settled bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts = append(s.attempts, a)
	var ne net.Error
	switch {
	case err != nil && errors.As(err, &ne) && ne.Timeout():
		s.hung++
		return false
	case err != nil:
		return false
	case a.status == http.StatusAccepted:
		var acc struct {
			OrderID string `json:"order_id"`
		}
		if err := json.Unmarshal(payload, &acc); err != nil || acc.OrderID == "" {
			s.unexpected = append(s.unexpected, fmt.Sprintf("202 without order id: %s", payload))
			return true
		}
		s.accepted[acc.OrderID] = true
		return true
	case a.status == http.StatusConflict:
		s.soldOut++
		return true
	case a.status == http.StatusServiceUnavailable:
		return false
	}
	s.unexpected = append(s.unexpected, fmt.Sprintf("%d %s", a.status, payload))
	return true
}

// acceptedIDs returns the ids of the orders answered 202, sorted.
func (s *sale) acceptedIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.accepted))
}

func (s *sale) counts() (accepted, soldOut int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.accepted), s.soldOut
}

// outage describes the gateway's unavailability after a fault at t0.
type outage struct {
	// Window is from t0 to the first 202 of an attempt sent after t0: the
	// first write that reached the SKU's new master.
	Window time.Duration
	// Refused and Broken count the attempts that ended after t0 and
	// before that first 202: answered 503, or failed in transport.
	Refused, Broken int
	// Slowest is the longest attempt of the whole sale.
	Slowest time.Duration
}

func (s *sale) outage(t0 time.Time) (outage, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var o outage
	var first time.Time
	for _, a := range s.attempts {
		o.Slowest = max(o.Slowest, a.done.Sub(a.sent))
		if a.status == http.StatusAccepted && !a.sent.Before(t0) && (first.IsZero() || a.done.Before(first)) {
			first = a.done
		}
	}
	if first.IsZero() {
		return o, false
	}
	for _, a := range s.attempts {
		if !a.done.After(t0) || !a.done.Before(first) {
			continue
		}
		switch a.status {
		case http.StatusServiceUnavailable:
			o.Refused++
		case 0:
			o.Broken++
		}
	}
	o.Window = first.Sub(t0)
	return o, true
}
