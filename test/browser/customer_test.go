package browser

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"surge/internal/testenv"
	"surge/pkg/app"
	"surge/pkg/config"
)

const (
	customerSecret   = "0123456789abcdef0123456789abcdef-browser"
	customerAudience = "surge-browser-test"
)

// serveShopPage serves the checkout as a shop's server would for a
// signed-in customer: index.html with the customer's token in its
// surge-customer-token meta tag, the rest as it is.
func serveShopPage(t *testing.T, token string) string {
	t.Helper()
	index, err := os.ReadFile(filepath.Join(checkoutDir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	const empty = `<meta name="surge-customer-token" content="">`
	if !strings.Contains(string(index), empty) {
		t.Fatalf("index.html has no %s for the shop to fill", empty)
	}
	page := strings.Replace(string(index), empty, `<meta name="surge-customer-token" content="`+token+`">`, 1)
	files := http.FileServer(http.Dir(checkoutDir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/index.html" {
			files.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(page))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func customerToken(t *testing.T, sub string, exp time.Time) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{Subject: sub,
		Audience: jwt.ClaimStrings{customerAudience}, ExpiresAt: jwt.NewNumericDate(exp)}).
		SignedString([]byte(customerSecret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCheckoutCustomerToken: with customer tokens on, the checkout on a
// shop's page that carries the signed-in customer's token buys as that
// customer (the query string's customer is ignored) and follows the order
// to its invoice; a page whose token has expired says to sign in again
// and places no order.
func TestCheckoutCustomerToken(t *testing.T) {
	sku := testenv.Unique("web-jwt-")
	alice := sku + "-alice"
	good := serveShopPage(t, customerToken(t, alice, time.Now().Add(10*time.Minute)))
	stale := serveShopPage(t, customerToken(t, sku+"-bob", time.Now().Add(-time.Minute)))
	p, _ := startPipeline(t, options{Gateway: func(c *app.GatewayConfig) {
		c.CustomerAuth = config.CustomerAuth{JWTSecret: customerSecret, Audience: customerAudience}
		c.CORSOrigins = append(c.CORSOrigins, good, stale)
	}})
	browser := newBrowser(t)
	p.loadStock(t, sku, 5)
	checkAuthorizationAllowed(t, p.API, good)

	signedIn := newTab(t, browser, alice, p.checkoutURL(good, sku, "mallory", url.Values{"deadline": {"20"}}))
	if who := signedIn.text("customer-id"); who != alice {
		t.Errorf("the page buys as %q, want the token's customer %q", who, alice)
	}
	if err := signedIn.buy(); err != nil {
		t.Fatal(err)
	}
	r, err := signedIn.outcome(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	signedIn.screenshot(t, "customer-token-"+r.Outcome)
	if r.Outcome != "invoiced" || !strings.Contains(r.Text, "Your order is confirmed (invoice #") {
		t.Fatalf("signed-in customer: outcome %s %q, want invoiced", r.Outcome, r.Text)
	}

	expired := newTab(t, browser, "expired", p.checkoutURL(stale, sku, "", url.Values{"deadline": {"20"}}))
	if err := expired.buy(); err != nil {
		t.Fatal(err)
	}
	r, err = expired.outcome(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	expired.screenshot(t, "customer-token-expired-"+r.Outcome)
	if r.Outcome != "error" || !strings.Contains(r.Text, "sign in again") {
		t.Errorf("expired token: outcome %s %q, want an error asking to sign in again", r.Outcome, r.Text)
	}
	if posts := expired.orderPosts(); len(posts) != 1 || posts[0].Status != http.StatusUnauthorized {
		t.Errorf("expired token: order requests %+v, want one answered 401 (no retry)", posts)
	}

	p.checkBooks(t, sku, 5, 1)
	if orders := p.orders(t, sku); len(orders) != 1 || orders[0].Customer != alice {
		t.Errorf("MySQL orders %+v, want only %s's", orders, alice)
	}
}

// checkAuthorizationAllowed: the gateway's CORS lets a page on origin
// send Authorization and read WWW-Authenticate.
func checkAuthorizationAllowed(t *testing.T, api, origin string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodOptions, api+"/v1/orders", nil)
	req.Header.Set("Origin", origin)
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "authorization,content-type,idempotency-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Access-Control-Allow-Origin") != origin ||
		!strings.Contains(strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers")), "authorization") {
		t.Errorf("preflight with Authorization from %s: %v, want it allowed", origin, resp.Header)
	}
	req, _ = http.NewRequest(http.MethodPost, api+"/v1/orders", strings.NewReader("{}"))
	req.Header.Set("Origin", origin)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized ||
		!strings.Contains(strings.ToLower(resp.Header.Get("Access-Control-Expose-Headers")), "www-authenticate") {
		t.Errorf("order without a token from %s: %d, exposed %q; want 401 with WWW-Authenticate exposed",
			origin, resp.StatusCode, resp.Header.Get("Access-Control-Expose-Headers"))
	}
}
