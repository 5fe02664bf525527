package customertoken_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"surge/pkg/customertoken"
	"surge/pkg/order"
)

// TestKeySetUnreachable: while the identity provider's key set cannot be
// fetched, a token naming a key the gateway does not hold is not called
// invalid (it may be good) but unavailable, a retryable 503; a verifier
// that fetched the set takes the same token. A token that fails for its own
// sake (an algorithm outside the pinned ones) stays invalid meanwhile.
func TestKeySetUnreachable(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	var up atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		j, err := jwkset.NewJWKFromKey(&key.PublicKey, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: "k1", ALG: jwkset.AlgRS256}})
		if err != nil {
			t.Error(err)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = jsonEncode(w, jwkset.JWKSMarshal{Keys: []jwkset.JWKMarshal{j.Marshal()}})
	}))
	defer srv.Close()
	v, err := customertoken.New(customertoken.Options{JWKSURL: srv.URL, Audience: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()

	claims := jwt.RegisteredClaims{Subject: "alice", Audience: jwt.ClaimStrings{"shop"},
		ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	tok.Header["kid"] = "k1"
	raw, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := v.Verify(ctx, raw); !errors.Is(err, order.ErrUnavailable) || errors.Is(err, customertoken.ErrInvalid) {
		t.Fatalf("key set down: %v, want unavailable, not invalid", err)
	}
	hs, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte("0123456789abcdef0123456789abcdef"))
	if _, err := v.Verify(ctx, hs); !errors.Is(err, customertoken.ErrInvalid) {
		t.Fatalf("HS256 token while the key set is down: %v, want invalid", err)
	}
	up.Store(true)
	// The first verifier fetches again on its interval, or on an unknown
	// key once a minute; a new one fetches at start.
	v2, err := customertoken.New(customertoken.Options{JWKSURL: srv.URL, Audience: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	defer v2.Close()
	if sub, err := v2.Verify(ctx, raw); err != nil || sub != "alice" {
		t.Fatalf("key set up: %q, %v", sub, err)
	}
}

func jsonEncode(w http.ResponseWriter, v any) error { return json.NewEncoder(w).Encode(v) }
