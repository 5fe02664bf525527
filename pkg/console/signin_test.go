package console

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"
)

func loginReq(token, remote string, headers map[string]string) *http.Request {
	form := url.Values{"token": {token}, "operator": {"dana"}}
	req := httptest.NewRequest(http.MethodPost, "/console/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.RemoteAddr = remote
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	return req
}

// TestSecureCookieBehindTrustedProxy: the session cookie is Secure when
// the gateway terminated TLS, or when a trusted proxy says the browser
// used https; the same header from anyone else, or a proxy's own "http"
// after a client's "https", leaves it plain.
func TestSecureCookieBehindTrustedProxy(t *testing.T) {
	c := &Console{Token: "s3cret", TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	h := c.Handler()
	for _, tt := range []struct {
		name   string
		remote string
		proto  string
		tls    bool
		secure bool
	}{
		{"TLS at the gateway", "192.0.2.7:5000", "", true, true},
		{"trusted proxy says https", "10.1.2.3:5000", "https", false, true},
		{"trusted proxy says HTTPS", "10.1.2.3:5000", "HTTPS", false, true},
		{"trusted proxy says http", "10.1.2.3:5000", "http", false, false},
		{"trusted proxy appended http to a client's https", "10.1.2.3:5000", "https, http", false, false},
		{"trusted proxy, no header", "10.1.2.3:5000", "", false, false},
		{"untrusted peer says https", "192.0.2.7:5000", "https", false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hdr := map[string]string{}
			if tt.proto != "" {
				hdr["X-Forwarded-Proto"] = tt.proto
			}
			req := loginReq("s3cret", tt.remote, hdr)
			if tt.tls {
				req.TLS = &tls.ConnectionState{}
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			cks := rec.Result().Cookies()
			if rec.Code != http.StatusSeeOther || len(cks) != 1 {
				t.Fatalf("sign in: %d, cookies %v", rec.Code, cks)
			}
			if cks[0].Secure != tt.secure {
				t.Errorf("Secure = %v, want %v", cks[0].Secure, tt.secure)
			}
		})
	}
}

// TestSignInThrottled: five wrong tokens from one address within a
// minute, then that address is answered 429 with Retry-After (the right
// token too) until the first failure is a minute old; other addresses
// are not held up; behind a trusted proxy each forwarded client counts
// on its own, while a client elsewhere cannot escape by forging
// X-Forwarded-For.
func TestSignInThrottled(t *testing.T) {
	now := time.Date(2026, 12, 3, 5, 0, 0, 0, time.UTC)
	c := &Console{Token: "s3cret", Now: func() time.Time { return now },
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	h := c.Handler()
	try := func(token, remote string, hdr map[string]string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, loginReq(token, remote, hdr))
		return rec
	}
	for i := range signInFailures {
		// Forged X-Forwarded-For from an untrusted peer counts against the peer.
		if rec := try("wrong", "192.0.2.7:1", map[string]string{"X-Forwarded-For": "198.51.100." + string(rune('1'+i))}); rec.Code != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d, want 401", i+1, rec.Code)
		}
		now = now.Add(time.Second)
	}
	rec := try("s3cret", "192.0.2.7:2", nil)
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "55" || len(rec.Result().Cookies()) != 0 {
		t.Fatalf("after 5 failures: %d, Retry-After %q, cookies %v; want 429, 55, none",
			rec.Code, rec.Header().Get("Retry-After"), rec.Result().Cookies())
	}
	if !strings.Contains(rec.Body.String(), "try again in 55 s") {
		t.Errorf("429 page does not say when to try again")
	}
	if rec := try("s3cret", "192.0.2.8:1", nil); rec.Code != http.StatusSeeOther {
		t.Errorf("another address: %d, want 303", rec.Code)
	}
	// Behind the trusted proxy: one client throttled, another not.
	for range signInFailures {
		try("wrong", "10.0.0.5:1", map[string]string{"X-Forwarded-For": "203.0.113.9"})
	}
	if rec := try("s3cret", "10.0.0.5:1", map[string]string{"X-Forwarded-For": "203.0.113.9"}); rec.Code != http.StatusTooManyRequests {
		t.Errorf("throttled client behind the proxy: %d, want 429", rec.Code)
	}
	if rec := try("s3cret", "10.0.0.5:1", map[string]string{"X-Forwarded-For": "203.0.113.10"}); rec.Code != http.StatusSeeOther {
		t.Errorf("another client behind the same proxy: %d, want 303", rec.Code)
	}
	now = now.Add(55 * time.Second)
	if rec := try("s3cret", "192.0.2.7:3", nil); rec.Code != http.StatusSeeOther {
		t.Errorf("a minute after the first failure: %d, want 303", rec.Code)
	}
}

// TestThrottleBounded: the throttle keeps at most its size of addresses,
// and counts IPv6 clients by their /64.
func TestThrottleBounded(t *testing.T) {
	th := newThrottle(2, time.Minute, 3, time.Now)
	for _, a := range []string{"192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4"} {
		th.fail(a)
	}
	if n := th.fails.Len(); n != 3 {
		t.Errorf("%d addresses kept, want 3", n)
	}
	if a, b := throttleKey("2001:db8::1"), throttleKey("2001:db8::ffff"); a != b || a != "2001:db8::/64" {
		t.Errorf("IPv6 keys %q %q, want one /64", a, b)
	}
	if k := throttleKey("::ffff:192.0.2.1"); k != "::ffff:192.0.2.1" {
		t.Errorf("mapped IPv4 key %q", k)
	}
}
