package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"surge/pkg/httpapi"
)

// Sessions are signed cookies, not server state: every gateway behind a
// load balancer accepts a session any of them issued, and a restart signs
// nobody out. The cookie carries the operator's name, an expiry and a
// random nonce, signed with HMAC-SHA256 under a key derived from the admin
// token; the CSRF token of the session is another HMAC of its nonce, so a
// page can only post a form when it was served to that session.
const (
	cookieName = "surge_console"
	// SessionTTL is how long a sign-in lasts.
	SessionTTL = 12 * time.Hour
	csrfField  = "csrf"
)

type session struct {
	Operator string `json:"op"`
	Expires  int64  `json:"exp"`
	Nonce    string `json:"n"`
}

var errNoSession = errors.New("not signed in")

func (c *Console) key() []byte {
	m := hmac.New(sha256.New, []byte(c.Token))
	m.Write([]byte("surge console session v1"))
	return m.Sum(nil)
}

func (c *Console) sign(payload []byte) []byte {
	m := hmac.New(sha256.New, c.key())
	m.Write(payload)
	return m.Sum(nil)
}

var b64 = base64.RawURLEncoding

// issue signs a new session for operator into the response's cookie.
func (c *Console) issue(w http.ResponseWriter, r *http.Request, operator string) {
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	s := session{Operator: operator, Expires: c.Now().Add(SessionTTL).Unix(), Nonce: b64.EncodeToString(nonce)}
	payload, _ := json.Marshal(s)
	value := b64.EncodeToString(payload) + "." + b64.EncodeToString(c.sign(payload))
	http.SetCookie(w, c.cookie(r, value, int(SessionTTL.Seconds())))
}

func (c *Console) cookie(r *http.Request, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: cookieName, Value: value, Path: Prefix, MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.viaHTTPS(r)}
}

// viaHTTPS reports whether the browser reached the console over HTTPS:
// this gateway terminated TLS, or the peer is a trusted proxy
// (SURGE_ADMIN_TRUSTED_PROXIES) whose X-Forwarded-Proto says https. The
// last value counts, the one the nearest proxy wrote; a client elsewhere
// cannot set it.
func (c *Console) viaHTTPS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	if !c.fromTrustedProxy(r) {
		return false
	}
	vs := r.Header.Values("X-Forwarded-Proto")
	if len(vs) == 0 {
		return false
	}
	parts := strings.Split(vs[len(vs)-1], ",")
	return strings.EqualFold(strings.TrimSpace(parts[len(parts)-1]), "https")
}

func (c *Console) fromTrustedProxy(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	a = a.Unmap()
	for _, p := range c.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// session returns the request's valid session.
func (c *Console) session(r *http.Request) (*session, error) {
	ck, err := r.Cookie(cookieName)
	if err != nil || c.Token == "" {
		return nil, errNoSession
	}
	p, sig, ok := strings.Cut(ck.Value, ".")
	if !ok {
		return nil, errNoSession
	}
	payload, err1 := b64.DecodeString(p)
	mac, err2 := b64.DecodeString(sig)
	if err1 != nil || err2 != nil || !hmac.Equal(mac, c.sign(payload)) {
		return nil, errNoSession
	}
	var s session
	if json.Unmarshal(payload, &s) != nil || s.Operator == "" || c.Now().Unix() >= s.Expires {
		return nil, errNoSession
	}
	return &s, nil
}

func (c *Console) csrfToken(s *session) string {
	return b64.EncodeToString(c.sign([]byte("csrf:" + s.Nonce)))
}

// page serves a GET page to a signed-in operator; anyone else is sent to
// sign in first.
func (c *Console) page(h func(w http.ResponseWriter, r *http.Request, s *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, err := c.session(r)
		if err != nil {
			http.Redirect(w, r, "/console/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		h(w, r, s)
	}
}

// api serves the pages' live JSON to a signed-in operator: 401 otherwise.
func (c *Console) api(h func(w http.ResponseWriter, r *http.Request, s *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, err := c.session(r)
		if err != nil {
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "sign in at /console/login"})
			return
		}
		h(w, r, s)
	}
}

// change serves a POST that changes something: it needs a session and the
// session's CSRF token in the form, else it is refused with 403 and
// nothing is done. A browser that says where the form came from must say
// this origin.
func (c *Console) change(h func(w http.ResponseWriter, r *http.Request, s *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, err := c.session(r)
		if err != nil {
			c.fail(w, nil, http.StatusForbidden, errors.New("not signed in: sign in to make changes"))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		got := r.PostFormValue(csrfField)
		if subtle.ConstantTimeCompare([]byte(got), []byte(c.csrfToken(s))) != 1 || !sameOrigin(r) {
			c.fail(w, s, http.StatusForbidden, errors.New("the form's CSRF token is missing or wrong: reload the page and try again"))
			return
		}
		h(w, r, s)
	}
}

// sameOrigin refuses a request whose Origin names another site.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" || o == "null" {
		return o == ""
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	c.render(w, http.StatusOK, "login.html", nil, "Sign in", "", loginData{Next: safeNext(r.URL.Query().Get("next"))})
}

type loginData struct {
	Next, Operator, Error string
}

// login checks the admin token (in constant time) and the operator's
// name, then issues the session and goes where the operator was headed.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	token, operator := r.PostFormValue("token"), strings.TrimSpace(r.PostFormValue("operator"))
	d := loginData{Next: safeNext(r.PostFormValue("next")), Operator: operator}
	addr := throttleKey(httpapi.ClientIP(r, c.TrustedProxies))
	if wait := c.signIns.wait(addr); wait > 0 {
		secs := int((wait + time.Second - 1) / time.Second)
		d.Error = fmt.Sprintf("Too many wrong tokens from your address: try again in %d s.", secs)
		c.Log.Warn("console: sign-in throttled", "addr", addr, "operator", operator, "retry_after_s", secs)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		c.render(w, http.StatusTooManyRequests, "login.html", nil, "Sign in", "", d)
		return
	}
	switch {
	case c.Token == "" || subtle.ConstantTimeCompare([]byte(token), []byte(c.Token)) != 1:
		d.Error = "That is not the admin token."
		c.signIns.fail(addr)
	case validOperator(operator) != nil:
		d.Error = validOperator(operator).Error()
	case !sameOrigin(r):
		d.Error = "Sign in from this console's own page."
	}
	if d.Error != "" {
		c.Log.Warn("console: sign-in refused", "addr", addr, "operator", operator, "why", d.Error)
		c.render(w, http.StatusUnauthorized, "login.html", nil, "Sign in", "", d)
		return
	}
	c.signIns.forget(addr)
	c.issue(w, r, operator)
	c.Log.Info("console: signed in", "operator", operator)
	http.Redirect(w, r, d.Next, http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request, s *session) {
	http.SetCookie(w, c.cookie(r, "", -1))
	http.Redirect(w, r, "/console/login", http.StatusSeeOther)
}

// safeNext keeps a redirect after sign-in inside the console.
func safeNext(next string) string {
	if !strings.HasPrefix(next, Prefix) || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return Prefix
	}
	return next
}

// validOperator is the rule the audit log holds names to (ops): 1-64
// printable ASCII characters.
func validOperator(name string) error {
	if name == "" {
		return errors.New("Say who you are: your name goes into every audit row.")
	}
	if len(name) > 64 || strings.ContainsFunc(name, func(r rune) bool { return r < ' ' || r > '~' }) {
		return errors.New("Your name must be 1-64 printable ASCII characters.")
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
