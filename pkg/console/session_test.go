package console

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// signedIn signs in to c's handler and returns the session cookie.
func signedIn(t *testing.T, h http.Handler, token, operator string) *http.Cookie {
	t.Helper()
	form := url.Values{"token": {token}, "operator": {operator}, "next": {"/console/health"}}
	req := httptest.NewRequest(http.MethodPost, "/console/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/console/health" {
		t.Fatalf("sign in: %d %q", rec.Code, rec.Header().Get("Location"))
	}
	for _, ck := range rec.Result().Cookies() {
		if ck.Name == cookieName {
			if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != Prefix {
				t.Errorf("session cookie %+v: want HttpOnly, SameSite=Strict, Path %s", ck, Prefix)
			}
			return ck
		}
	}
	t.Fatal("no session cookie")
	return nil
}

// TestSessions: only the admin token signs in, a session cookie cannot be
// forged, altered or used past its expiry, and a change needs the
// session's own CSRF token.
func TestSessions(t *testing.T) {
	now := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	c := &Console{Token: "s3cret", Now: func() time.Time { return now }}
	h := c.Handler()

	for _, form := range []url.Values{
		{"token": {"wrong"}, "operator": {"dana"}},
		{"token": {"s3cret"}, "operator": {""}},
		{"token": {"s3cret"}, "operator": {"dana\x01"}},
	} {
		req := httptest.NewRequest(http.MethodPost, "/console/login", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized || len(rec.Result().Cookies()) != 0 {
			t.Errorf("sign in with %v: %d, cookies %v; want 401 and no session", form, rec.Code, rec.Result().Cookies())
		}
	}

	ck := signedIn(t, h, "s3cret", "dana")
	s, err := c.session(withCookie(ck))
	if err != nil || s.Operator != "dana" {
		t.Fatalf("session = %+v, %v", s, err)
	}
	payload, sig, _ := strings.Cut(ck.Value, ".")
	forged := `{"op":"mallory","exp":` + "9999999999" + `,"n":"x"}`
	for name, value := range map[string]string{
		"altered payload": b64.EncodeToString([]byte(forged)) + "." + sig,
		"no signature":    payload,
		"bad signature":   payload + "." + b64.EncodeToString([]byte("nope")),
	} {
		if _, err := c.session(withCookie(&http.Cookie{Name: cookieName, Value: value})); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	other := &Console{Token: "another", Now: c.Now}
	if _, err := other.session(withCookie(ck)); err == nil {
		t.Error("a session signed under another admin token was accepted")
	}
	now = now.Add(SessionTTL)
	if _, err := c.session(withCookie(ck)); err == nil {
		t.Error("an expired session was accepted")
	}
	now = now.Add(-time.Hour)

	post := func(form url.Values, origin string) int {
		req := httptest.NewRequest(http.MethodPost, "/console/logout", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		req.AddCookie(ck)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	good := c.csrfToken(s)
	if code := post(url.Values{}, ""); code != http.StatusForbidden {
		t.Errorf("no CSRF token: %d, want 403", code)
	}
	if code := post(url.Values{"csrf": {good + "x"}}, ""); code != http.StatusForbidden {
		t.Errorf("wrong CSRF token: %d, want 403", code)
	}
	if code := post(url.Values{"csrf": {good}}, "https://evil.example"); code != http.StatusForbidden {
		t.Errorf("another origin: %d, want 403", code)
	}
	if code := post(url.Values{"csrf": {good}}, "http://example.com"); code != http.StatusSeeOther {
		t.Errorf("the session's CSRF token from this origin: %d, want 303", code)
	}
}

func withCookie(ck *http.Cookie) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/console/", nil)
	r.AddCookie(ck)
	return r
}

func TestSafeNext(t *testing.T) {
	for in, want := range map[string]string{
		"/console/orders/o_1":  "/console/orders/o_1",
		"":                     "/console/",
		"https://evil.example": "/console/",
		"//evil.example/x":     "/console/",
		"/console/\\evil":      "/console/",
		"/metrics":             "/console/",
	} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRates(t *testing.T) {
	now := time.Unix(1000, 0)
	r := newRates(func() time.Time { return now })
	if a, i := r.observe("x", 0, 0); a != 0 || i != 0 {
		t.Fatalf("first sample: %v %v", a, i)
	}
	for range 10 {
		now = now.Add(time.Second)
		r.observe("x", 0, 0)
	}
	now = now.Add(time.Second)
	// 20 units accepted and 10 invoiced in the last second, over a 5 s window.
	if a, i := r.observe("x", 20, 10); a != 4 || i != 2 {
		t.Errorf("rates = %v/s accepted, %v/s invoiced; want 4 and 2 (over 5 s)", a, i)
	}
}
