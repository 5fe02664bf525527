package app_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"

	"surge/internal/apptest"
	"surge/internal/testenv"
	"surge/internal/testkit"
	"surge/pkg/config"
	"surge/pkg/keys"
	"surge/pkg/order"
	"surge/pkg/store"
)

const customerAudience = "surge-checkout-test"

// startCustomerPipeline is startPipeline with customer tokens checked as
// auth says. The gateway trusts 127.0.0.1 as a proxy, so that each test's
// client address (X-Forwarded-For) is its own and its rate budget can be
// looked at.
func startCustomerPipeline(t *testing.T, auth config.CustomerAuth) *pipeline {
	t.Helper()
	c := commonConfig(t)
	cfg := apptest.GatewayConfig(t, c, "test-token")
	cfg.CustomerAuth = auth
	cfg.TrustedProxies = []string{"127.0.0.1/32"}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	url, g := startGatewayConfig(t, cfg)
	stopW := startWorker(t, c)
	db, err := store.Open(context.Background(), c.MySQL.DSN, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return &pipeline{URL: url, Admin: apptest.AdminURL(g), Token: "test-token", DB: db, Stock: g.Stock, Cfg: c, stopW: stopW}
}

// claims are a token's claims for customer sub, valid now for the test
// audience.
func claims(sub string) jwt.RegisteredClaims {
	now := time.Now()
	return jwt.RegisteredClaims{Subject: sub, Audience: jwt.ClaimStrings{customerAudience},
		IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now.Add(-time.Minute)),
		ExpiresAt: jwt.NewNumericDate(now.Add(10 * time.Minute))}
}

func sign(t *testing.T, m jwt.SigningMethod, kid string, c jwt.Claims, key any) string {
	t.Helper()
	tok := jwt.NewWithClaims(m, c)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// orderCall is one request of a customer test: its answer and headers.
type orderCall struct {
	answer
	Header http.Header
}

// send sends method path with the bearer token (none when ""), from
// client address ip, with body (none when "").
func send(t *testing.T, url, method, path, token, ip, key, body string) orderCall {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, url+path, rd)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("X-Forwarded-For", ip)
	resp, err := newClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a answer
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("answer %d is not JSON: %q", resp.StatusCode, raw)
	}
	a.Status = resp.StatusCode
	return orderCall{a, resp.Header}
}

// nothingWritten checks that no engine holds anything of a refused
// order: the SKU's Redis and MySQL state as before, no idempotency record
// for customer's key, no customer budget and no client-address budget
// spent.
func nothingWritten(t *testing.T, p *pipeline, sku string, before state, customer, key, ip string) {
	t.Helper()
	if diff := cmp.Diff(before, snapshot(t, p, sku)); diff != "" {
		t.Errorf("state changed (-before +after):\n%s", diff)
	}
	w := order.Window(time.Now(), p.Cfg.IdempotencyTTL)
	written := []string{keys.CustomerRate(customer), keys.RateLimit("ip:" + ip)}
	for _, win := range []int64{w - 1, w, w + 1} {
		written = append(written, keys.Idem(order.IDFor(customer, key, win)))
	}
	rdb := testenv.Redis(t)
	for _, k := range written {
		if n, err := rdb.Exists(context.Background(), k).Result(); err != nil || n != 0 {
			t.Errorf("%s was written (%d, %v)", k, n, err)
		}
	}
}

// refusal is a request that must be answered 401 with nothing written.
type refusal struct {
	name, token string
	// bare: no token was sent, so WWW-Authenticate carries no error code
	// (RFC 6750 3.1).
	bare bool
}

func checkRefusals(t *testing.T, p *pipeline, sku, customer string, cases []refusal) {
	t.Helper()
	before := snapshot(t, p, sku)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ip := fmt.Sprintf("2001:db8:%x::%x", time.Now().UnixNano()&0xfff|0x1000, i+1)
			key := testenv.Unique("key-")
			a := send(t, p.URL, http.MethodPost, "/v1/orders", c.token, ip, key, orderBody(sku, 1, customer))
			if a.Status != http.StatusUnauthorized || a.Error.Code != "unauthenticated" || a.Error.Message == "" {
				t.Fatalf("got %d %+v, want 401 unauthenticated", a.Status, a.Error)
			}
			want := `Bearer realm="surge", error="invalid_token"`
			if c.bare {
				want = `Bearer realm="surge"`
			}
			if got := a.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, want) || c.bare && strings.Contains(got, "error=") {
				t.Errorf("WWW-Authenticate %q, want %q", got, want)
			}
			nothingWritten(t, p, sku, before, customer, key, ip)
			g := send(t, p.URL, http.MethodGet, "/v1/orders/"+order.IDFor(customer, key, 0), c.token, ip, "", "")
			if g.Status != http.StatusUnauthorized || g.Error.Code != "unauthenticated" {
				t.Errorf("GET: %d %+v, want 401 unauthenticated", g.Status, g.Error)
			}
		})
	}
}

// TestCustomerTokensSecret: with SURGE_CUSTOMER_JWT_SECRET, an order
// without a good HS256 token is refused 401 with nothing written; a good
// one is taken for its subject, and the order is shown to that customer
// only.
func TestCustomerTokensSecret(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef-test")
	p := startCustomerPipeline(t, config.CustomerAuth{JWTSecret: string(secret), Audience: customerAudience})
	sku := testenv.Unique("jwt-")
	p.loadStock(t, sku, 10)
	alice, bob := testenv.Unique("alice-"), testenv.Unique("bob-")

	expired, early, otherAud, noExp := claims(alice), claims(alice), claims(alice), claims(alice)
	expired.ExpiresAt = jwt.NewNumericDate(time.Now().Add(-time.Hour))
	early.NotBefore = jwt.NewNumericDate(time.Now().Add(time.Hour))
	otherAud.Audience = jwt.ClaimStrings{"another-app"}
	noExp.ExpiresAt = nil
	none := sign(t, jwt.SigningMethodNone, "", claims(alice), jwt.UnsafeAllowNoneSignatureType)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	checkRefusals(t, p, sku, alice, []refusal{
		{name: "missing", bare: true},
		{name: "not a JWT", token: "not-a-token"},
		{name: "expired", token: sign(t, jwt.SigningMethodHS256, "", expired, secret)},
		{name: "not yet valid", token: sign(t, jwt.SigningMethodHS256, "", early, secret)},
		{name: "another audience", token: sign(t, jwt.SigningMethodHS256, "", otherAud, secret)},
		{name: "no expiry", token: sign(t, jwt.SigningMethodHS256, "", noExp, secret)},
		{name: "another secret", token: sign(t, jwt.SigningMethodHS256, "", claims(alice), []byte("another-secret-of-thirty-two-bytes!!"))},
		{name: "alg none", token: none},
		{name: "ES256 where HS256 is pinned", token: sign(t, jwt.SigningMethodES256, "", claims(alice), ecKey)},
		{name: "HS512", token: sign(t, jwt.SigningMethodHS512, "", claims(alice), secret)},
		{name: "subject no customer id", token: sign(t, jwt.SigningMethodHS256, "", claims("auth0|alice"), secret)},
	})

	aliceTok, bobTok := sign(t, jwt.SigningMethodHS256, "", claims(alice), secret), sign(t, jwt.SigningMethodHS256, "", claims(bob), secret)
	ip := "2001:db8:ffff::1"
	// Another customer's id in the body: 403, nothing written.
	before := snapshot(t, p, sku)
	key := testenv.Unique("key-")
	mismatchIP := "2001:db8:ffff::9"
	a := send(t, p.URL, http.MethodPost, "/v1/orders", aliceTok, mismatchIP, key, orderBody(sku, 1, bob))
	if a.Status != http.StatusForbidden || a.Error.Code != "customer_mismatch" {
		t.Fatalf("order as another customer: %d %+v, want 403 customer_mismatch", a.Status, a.Error)
	}
	nothingWritten(t, p, sku, before, bob, key, mismatchIP)
	nothingWritten(t, p, sku, before, alice, key, mismatchIP)

	// The token's customer, in the body or left out.
	a = send(t, p.URL, http.MethodPost, "/v1/orders", aliceTok, ip, testenv.Unique("key-"), orderBody(sku, 1, alice))
	b := send(t, p.URL, http.MethodPost, "/v1/orders", aliceTok, ip, testenv.Unique("key-"), fmt.Sprintf(`{"sku":%q,"qty":2}`, sku))
	if a.Status != http.StatusAccepted || b.Status != http.StatusAccepted {
		t.Fatalf("good tokens: %d %+v, %d %+v, want 202", a.Status, a.Error, b.Status, b.Error)
	}
	if order.CustomerTag(b.OrderID) != order.TagFor(alice) {
		t.Fatalf("order %s without customer_id is not the token's customer's", b.OrderID)
	}
	// Visible to its customer whatever its state by now (pending, accepted or already invoiced).
	checkVisibility(t, p, []string{a.OrderID, b.OrderID}, aliceTok, bobTok, "pending accepted invoiced")
	waitSettled(t, p.DB, a.OrderID, b.OrderID)
	checkVisibility(t, p, []string{a.OrderID, b.OrderID}, aliceTok, bobTok, "invoiced")
	var owner string
	if err := p.DB.DB().GetContext(context.Background(), &owner, "SELECT customer_id FROM orders WHERE order_id = ?", b.OrderID); err != nil || owner != alice {
		t.Fatalf("MySQL has order %s for %q (%v), want %q", b.OrderID, owner, err, alice)
	}
}

// checkVisibility: each order is status for its customer's token, 404
// not_found for another customer's, like an id nobody has.
func checkVisibility(t *testing.T, p *pipeline, ids []string, own, other, status string) {
	t.Helper()
	for _, id := range ids {
		if g := send(t, p.URL, http.MethodGet, "/v1/orders/"+id, own, "2001:db8:ffff::2", "", ""); g.Status != http.StatusOK || !strings.Contains(status, g.State) || g.State == "" {
			t.Errorf("own order %s: %d %q %+v, want 200 %s", id, g.Status, g.State, g.Error, status)
		}
		if g := send(t, p.URL, http.MethodGet, "/v1/orders/"+id, other, "2001:db8:ffff::2", "", ""); g.Status != http.StatusNotFound || g.Error.Code != "not_found" {
			t.Errorf("another customer's order %s: %d %+v, want 404 not_found", id, g.Status, g.Error)
		}
	}
}

func waitSettled(t *testing.T, db *store.Store, ids ...string) {
	t.Helper()
	testkit.WaitFor(t, "orders invoiced", 30*time.Second, func() (bool, error) {
		st, err := testkit.OrderStatuses(context.Background(), db, ids)
		return st[string(order.StatusInvoiced)] == len(ids), err
	})
}

// keySetServer serves a JSON Web Key Set that the test can change (a
// rotation).
type keySetServer struct {
	mu   sync.Mutex
	keys []jwkset.JWKMarshal
	*httptest.Server
}

func newKeySetServer(t *testing.T) *keySetServer {
	s := &keySetServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(jwkset.JWKSMarshal{Keys: s.keys})
	}))
	t.Cleanup(s.Close)
	return s
}

// publish makes the set hold the public halves of these keys, by kid.
func (s *keySetServer) publish(t *testing.T, pub map[string]any) {
	t.Helper()
	var out []jwkset.JWKMarshal
	for kid, k := range pub {
		alg := jwkset.AlgRS256
		if _, ok := k.(*ecdsa.PublicKey); ok {
			alg = jwkset.AlgES256
		}
		j, err := jwkset.NewJWKFromKey(k, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: kid, ALG: alg, USE: jwkset.UseSig}})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, j.Marshal())
	}
	s.mu.Lock()
	s.keys = out
	s.mu.Unlock()
}

// TestCustomerTokensKeySet: with SURGE_CUSTOMER_JWKS_URL, RS256 and ES256
// tokens signed by the set's keys are taken; an HS256 token (even one
// "signed" with the set's public key), alg none, or a token signed by a
// key outside the set are refused with nothing written; and after a
// rotation a token signed by the new key is taken once the set is
// fetched again.
func TestCustomerTokensKeySet(t *testing.T) {
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	intruder, _ := rsa.GenerateKey(rand.Reader, 2048)
	set := newKeySetServer(t)
	set.publish(t, map[string]any{"rsa-1": &rsaKey.PublicKey, "ec-1": &ecKey.PublicKey})
	p := startCustomerPipeline(t, config.CustomerAuth{JWKSURL: set.URL, JWKSRefresh: time.Hour, Audience: customerAudience})
	sku := testenv.Unique("jwks-")
	p.loadStock(t, sku, 10)
	alice := testenv.Unique("alice-")

	der, _ := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	expired := claims(alice)
	expired.ExpiresAt = jwt.NewNumericDate(time.Now().Add(-time.Hour))
	checkRefusals(t, p, sku, alice, []refusal{
		{name: "missing", bare: true},
		{name: "HS256 with the public key as secret", token: sign(t, jwt.SigningMethodHS256, "rsa-1", claims(alice), pubPEM)},
		{name: "HS256 with the public key's DER as secret", token: sign(t, jwt.SigningMethodHS256, "rsa-1", claims(alice), der)},
		{name: "alg none", token: sign(t, jwt.SigningMethodNone, "rsa-1", claims(alice), jwt.UnsafeAllowNoneSignatureType)},
		{name: "signed by another key, same kid", token: sign(t, jwt.SigningMethodRS256, "rsa-1", claims(alice), intruder)},
		{name: "signed by another key, no kid", token: sign(t, jwt.SigningMethodRS256, "", claims(alice), intruder)},
		{name: "RS256 naming the EC key", token: sign(t, jwt.SigningMethodRS256, "ec-1", claims(alice), rsaKey)},
		{name: "expired", token: sign(t, jwt.SigningMethodRS256, "rsa-1", expired, rsaKey)},
	})

	ip := "2001:db8:fffe::1"
	for _, tok := range []string{sign(t, jwt.SigningMethodRS256, "rsa-1", claims(alice), rsaKey),
		sign(t, jwt.SigningMethodES256, "ec-1", claims(alice), ecKey)} {
		if a := send(t, p.URL, http.MethodPost, "/v1/orders", tok, ip, testenv.Unique("key-"), orderBody(sku, 1, alice)); a.Status != http.StatusAccepted {
			t.Fatalf("good token: %d %+v, want 202", a.Status, a.Error)
		}
	}

	// Rotation: the provider publishes a new key and signs with it; the
	// gateway has not fetched the set since it started.
	rotated, _ := rsa.GenerateKey(rand.Reader, 2048)
	set.publish(t, map[string]any{"rsa-2": &rotated.PublicKey, "ec-1": &ecKey.PublicKey})
	tok := sign(t, jwt.SigningMethodRS256, "rsa-2", claims(alice), rotated)
	a := send(t, p.URL, http.MethodPost, "/v1/orders", tok, ip, testenv.Unique("key-"), orderBody(sku, 1, alice))
	if a.Status != http.StatusAccepted {
		t.Fatalf("token signed by the rotated key: %d %+v, want 202 after the set is fetched again", a.Status, a.Error)
	}
	if g := send(t, p.URL, http.MethodGet, "/v1/orders/"+a.OrderID, tok, ip, "", ""); g.Status != http.StatusOK {
		t.Fatalf("own order after rotation: %d %+v", g.Status, g.Error)
	}
}
