package customertoken_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"surge/pkg/customertoken"
	"surge/pkg/order"
)

// keySetServer is an identity provider's key set endpoint: it serves the
// public halves of the keys the test publishes (a rotation publishes a new
// one), fails while down, and counts the fetches it was asked for.
type keySetServer struct {
	*httptest.Server
	mu      sync.Mutex
	keys    map[string]*rsa.PrivateKey
	down    bool
	fetches atomic.Int64
	// slow holds each answer back a little, so that tokens arriving
	// meanwhile find a fetch in flight.
	slow time.Duration
}

func newKeySetServer(t *testing.T) *keySetServer {
	t.Helper()
	s := &keySetServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fetches.Add(1)
		s.mu.Lock()
		down, slow := s.down, s.slow
		set := jwkset.JWKSMarshal{Keys: []jwkset.JWKMarshal{}}
		for kid, k := range s.keys {
			j, err := jwkset.NewJWKFromKey(&k.PublicKey, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: kid, ALG: jwkset.AlgRS256}})
			if err != nil {
				t.Error(err)
			}
			set.Keys = append(set.Keys, j.Marshal())
		}
		s.mu.Unlock()
		time.Sleep(slow)
		if down {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(set)
	}))
	t.Cleanup(s.Close)
	return s
}

// publish makes the set hold exactly these keys, by kid.
func (s *keySetServer) publish(keys map[string]*rsa.PrivateKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = keys
}

func (s *keySetServer) setDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

// clock is the verifier's clock, moved by the test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Now()} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newVerifier(t *testing.T, set *keySetServer, c *clock) *customertoken.Verifier {
	t.Helper()
	v, err := customertoken.New(customertoken.Options{JWKSURL: set.URL, Audience: "shop", Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	return v
}

func newKey(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// claims are a good token's claims for sub at now.
func claims(sub string, now time.Time) jwt.RegisteredClaims {
	return jwt.RegisteredClaims{Subject: sub, Audience: jwt.ClaimStrings{"shop"},
		IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour))}
}

func sign(t *testing.T, m jwt.SigningMethod, kid string, c jwt.Claims, key any) string {
	t.Helper()
	tok := jwt.NewWithClaims(m, c)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	raw, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// retryAfter is how long an unavailable answer asks to wait, and whether
// err is one: not taken, retry.
func retryAfter(err error) (time.Duration, bool) {
	var u *order.UnavailableError
	if !errors.Is(err, order.ErrUnavailable) || errors.Is(err, customertoken.ErrInvalid) || !errors.As(err, &u) {
		return 0, false
	}
	return u.RetryAfter, true
}

// verifyErr is how v refuses raw; nil when it takes it.
func verifyErr(v *customertoken.Verifier, raw string) error {
	_, err := v.Verify(context.Background(), raw)
	return err
}

// TestRotationAfterJunk: a token naming a key id the provider never
// published arrives and is refused; then the provider rotates (it
// publishes a new key beside the old one and signs with it), and a
// customer's token signed by the new key comes. It is taken, at once or,
// if the key set was fetched for the junk a moment ago, after the short
// wait its unavailable answer names: the junk's fetch does not shut the
// rotation out until the hourly refresh.
func TestRotationAfterJunk(t *testing.T) {
	ctx := context.Background()
	k1 := newKey(t)
	set := newKeySetServer(t)
	set.publish(map[string]*rsa.PrivateKey{"k1": k1})
	clk := newClock()
	v := newVerifier(t, set, clk)

	junk := sign(t, jwt.SigningMethodRS256, "made-up", claims("mallory", clk.Now()), newKey(t))
	if _, err := v.Verify(ctx, junk); !errors.Is(err, customertoken.ErrInvalid) {
		t.Fatalf("junk token: %v, want invalid", err)
	}

	clk.Add(time.Second)
	k2 := newKey(t)
	set.publish(map[string]*rsa.PrivateKey{"k1": k1, "k2": k2})
	real := sign(t, jwt.SigningMethodRS256, "k2", claims("alice", clk.Now()), k2)
	sub, err := v.Verify(ctx, real)
	if wait, ok := retryAfter(err); ok {
		if wait <= 0 || wait > customertoken.MinFetchInterval {
			t.Fatalf("token of the rotated key: unavailable, retry after %v; want within (0, %v]", wait, customertoken.MinFetchInterval)
		}
		clk.Add(wait)
		sub, err = v.Verify(ctx, real)
	}
	if err != nil || sub != "alice" {
		t.Fatalf("token of the rotated key: %q, %v; want alice", sub, err)
	}
	// The old key is still published: tokens it signed are still taken.
	if sub, err := v.Verify(ctx, sign(t, jwt.SigningMethodRS256, "k1", claims("bob", clk.Now()), k1)); err != nil || sub != "bob" {
		t.Fatalf("token of the old key: %q, %v", sub, err)
	}
}

// verifyAll verifies tokens all at once and returns each one's outcome.
func verifyAll(v *customertoken.Verifier, tokens []string) ([]string, []error) {
	subs, errs := make([]string, len(tokens)), make([]error, len(tokens))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, raw := range tokens {
		wg.Go(func() {
			<-start
			subs[i], errs[i] = v.Verify(context.Background(), raw)
		})
	}
	close(start)
	wg.Wait()
	return subs, errs
}

// TestJunkFloodCostsOneFetchPerInterval: many tokens naming made-up key
// ids at once, from anyone, cost the identity provider at most one fetch
// per MinFetchInterval, shared by all the tokens waiting for it; none is
// taken, each is refused (the fetch did not hold its key) or answered
// unavailable with a wait of at most the interval. A rotation in the
// middle of the flood is picked up by the next fetch, and its tokens are
// taken.
func TestJunkFloodCostsOneFetchPerInterval(t *testing.T) {
	const n = 400
	k1, junkKey := newKey(t), newKey(t)
	set := newKeySetServer(t)
	set.publish(map[string]*rsa.PrivateKey{"k1": k1})
	set.slow = 50 * time.Millisecond
	clk := newClock()
	v := newVerifier(t, set, clk)
	started := set.fetches.Load()

	junk := func(round int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = sign(t, jwt.SigningMethodRS256, fmt.Sprintf("junk-%d-%d", round, i), claims("mallory", clk.Now()), junkKey)
		}
		return out
	}
	checkRefused := func(round string, subs []string, errs []error) (refused, unavailable int) {
		t.Helper()
		for i, err := range errs {
			wait, ok := retryAfter(err)
			switch {
			case errors.Is(err, customertoken.ErrInvalid):
				refused++
			case ok && wait > 0 && wait <= customertoken.MinFetchInterval:
				unavailable++
			default:
				t.Fatalf("%s: junk token %d: %q, %v; want invalid, or unavailable for at most %v", round, i, subs[i], err, customertoken.MinFetchInterval)
			}
		}
		return refused, unavailable
	}

	subs, errs := verifyAll(v, junk(1))
	refused, unavailable := checkRefused("first flood", subs, errs)
	if got := set.fetches.Load() - started; got != 1 {
		t.Fatalf("first flood: %d fetches, want 1", got)
	}
	if refused == 0 {
		t.Fatalf("first flood: none refused after the fetch, %d unavailable", unavailable)
	}
	t.Logf("first flood: %d refused by the fetch they shared, %d unavailable", refused, unavailable)

	// The provider rotates while the flood goes on; the interval has not
	// passed, so the customer's token is told to come back, and no fetch
	// is made.
	k2 := newKey(t)
	set.publish(map[string]*rsa.PrivateKey{"k1": k1, "k2": k2})
	real := sign(t, jwt.SigningMethodRS256, "k2", claims("alice", clk.Now()), k2)
	subs, errs = verifyAll(v, append(junk(2), real))
	checkRefused("second flood", subs, errs)
	if got := set.fetches.Load() - started; got != 1 {
		t.Fatalf("second flood, within the interval: %d fetches, want still 1", got)
	}

	clk.Add(customertoken.MinFetchInterval)
	tokens := junk(3)
	for range 10 {
		tokens = append(tokens, real)
	}
	subs, errs = verifyAll(v, tokens)
	checkRefused("third flood", subs[:n], errs[:n])
	for i := n; i < len(tokens); i++ {
		if errs[i] != nil || subs[i] != "alice" {
			t.Fatalf("third flood, the interval passed: the rotated key's token %q, %v; want alice", subs[i], errs[i])
		}
	}
	if got := set.fetches.Load() - started; got != 2 {
		t.Fatalf("third flood, the interval passed: %d fetches in all, want 2", got)
	}
}

// TestJunkKidRemembered: a key id a fetch was asked for and did not hold
// is refused at once until the next fetch may be made, at no cost; an id
// no fetch was asked for meanwhile is answered unavailable until then.
// Once the interval has passed, the remembered id may cause a fetch again
// (a key published since would be found).
func TestJunkKidRemembered(t *testing.T) {
	ctx := context.Background()
	set := newKeySetServer(t)
	set.publish(map[string]*rsa.PrivateKey{"k1": newKey(t)})
	clk := newClock()
	v := newVerifier(t, set, clk)
	started := set.fetches.Load()
	junkKey := newKey(t)
	junk := sign(t, jwt.SigningMethodRS256, "junk", claims("mallory", clk.Now()), junkKey)

	for i := range 3 {
		if _, err := v.Verify(ctx, junk); !errors.Is(err, customertoken.ErrInvalid) {
			t.Fatalf("junk token, try %d: %v, want invalid", i, err)
		}
	}
	if got := set.fetches.Load() - started; got != 1 {
		t.Fatalf("the same junk token thrice: %d fetches, want 1", got)
	}
	clk.Add(2 * time.Second)
	other := sign(t, jwt.SigningMethodRS256, "other", claims("mallory", clk.Now()), junkKey)
	if wait, ok := retryAfter(verifyErr(v, other)); !ok || wait != customertoken.MinFetchInterval-2*time.Second {
		t.Fatalf("another unknown key id 2 s after the fetch: retry after %v (unavailable %v), want %v", wait, ok, customertoken.MinFetchInterval-2*time.Second)
	}
	clk.Add(customertoken.MinFetchInterval)
	if _, err := v.Verify(ctx, junk); !errors.Is(err, customertoken.ErrInvalid) {
		t.Fatalf("junk token after the interval: %v, want invalid", err)
	}
	if got := set.fetches.Load() - started; got != 2 {
		t.Fatalf("junk token after the interval: %d fetches in all, want 2", got)
	}
}

// TestBadTokensSpendNoFetch: a token that fails for its own sake (expired,
// for another audience, no customer for a subject, an algorithm outside
// the pinned ones) is refused without a fetch, whatever key id it names;
// the next fetch is still there for a token that could be good.
func TestBadTokensSpendNoFetch(t *testing.T) {
	ctx := context.Background()
	k1 := newKey(t)
	set := newKeySetServer(t)
	set.publish(map[string]*rsa.PrivateKey{"k1": k1})
	clk := newClock()
	v := newVerifier(t, set, clk)
	started := set.fetches.Load()
	now := clk.Now()

	expired := claims("mallory", now.Add(-2*time.Hour))
	otherAudience := claims("mallory", now)
	otherAudience.Audience = jwt.ClaimStrings{"another-app"}
	noCustomer := claims("auth0|123", now)
	noSubject := claims("", now)
	junkKey := newKey(t)
	for name, raw := range map[string]string{
		"expired":             sign(t, jwt.SigningMethodRS256, "junk-1", expired, junkKey),
		"another audience":    sign(t, jwt.SigningMethodRS256, "junk-2", otherAudience, junkKey),
		"subject no customer": sign(t, jwt.SigningMethodRS256, "junk-3", noCustomer, junkKey),
		"no subject":          sign(t, jwt.SigningMethodRS256, "junk-4", noSubject, junkKey),
		"HS256":               sign(t, jwt.SigningMethodHS256, "junk-5", claims("mallory", now), []byte("0123456789abcdef0123456789abcdef")),
		"not a JWT":           "junk.junk.junk",
	} {
		if _, err := v.Verify(ctx, raw); !errors.Is(err, customertoken.ErrInvalid) {
			t.Errorf("%s: %v, want invalid", name, err)
		}
	}
	if got := set.fetches.Load() - started; got != 0 {
		t.Fatalf("bad tokens: %d fetches, want none", got)
	}
	k2 := newKey(t)
	set.publish(map[string]*rsa.PrivateKey{"k1": k1, "k2": k2})
	if sub, err := v.Verify(ctx, sign(t, jwt.SigningMethodRS256, "k2", claims("alice", now), k2)); err != nil || sub != "alice" {
		t.Fatalf("token of a new key after the bad ones: %q, %v; want alice at once", sub, err)
	}
}

// TestKeySetUnreachable: while the identity provider's key set cannot be
// fetched, a token naming a key the gateway does not hold is not called
// invalid (it may be good) but unavailable, a retryable 503 with the wait
// until the next fetch; once the set is served again, the next fetch takes
// the same token. A token that fails for its own sake (an algorithm
// outside the pinned ones, expired) stays invalid meanwhile.
func TestKeySetUnreachable(t *testing.T) {
	ctx := context.Background()
	key := newKey(t)
	set := newKeySetServer(t)
	set.publish(map[string]*rsa.PrivateKey{"k1": key})
	set.setDown(true)
	clk := newClock()
	v := newVerifier(t, set, clk)

	raw := sign(t, jwt.SigningMethodRS256, "k1", claims("alice", clk.Now()), key)
	_, err := v.Verify(ctx, raw)
	if wait, ok := retryAfter(err); !ok || !errors.Is(err, customertoken.ErrKeysUnavailable) || wait <= 0 || wait > customertoken.MinFetchInterval {
		t.Fatalf("key set down: %v, want keys unavailable, retry within %v", err, customertoken.MinFetchInterval)
	}
	hs := sign(t, jwt.SigningMethodHS256, "k1", claims("alice", clk.Now()), []byte("0123456789abcdef0123456789abcdef"))
	if _, err := v.Verify(ctx, hs); !errors.Is(err, customertoken.ErrInvalid) {
		t.Fatalf("HS256 token while the key set is down: %v, want invalid", err)
	}
	expired := sign(t, jwt.SigningMethodRS256, "k1", claims("alice", clk.Now().Add(-2*time.Hour)), key)
	if _, err := v.Verify(ctx, expired); !errors.Is(err, customertoken.ErrInvalid) {
		t.Fatalf("expired token while the key set is down: %v, want invalid", err)
	}
	noKid := sign(t, jwt.SigningMethodRS256, "", claims("alice", clk.Now()), key)
	if _, ok := retryAfter(verifyErr(v, noKid)); !ok {
		t.Fatalf("token without a key id while no key could be fetched: want unavailable")
	}
	set.setDown(false)
	if _, ok := retryAfter(verifyErr(v, raw)); !ok {
		t.Fatalf("key set back, within the interval: want unavailable still (no fetch yet)")
	}
	clk.Add(customertoken.MinFetchInterval)
	if sub, err := v.Verify(ctx, raw); err != nil || sub != "alice" {
		t.Fatalf("key set back: %q, %v", sub, err)
	}
}
