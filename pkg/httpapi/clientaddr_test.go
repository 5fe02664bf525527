package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestClientIP(t *testing.T) {
	trusted, err := ParseTrustedProxies([]string{"10.213.7.10", "10.0.0.0/8", " fd00::/8 ", ""})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		trusted bool // use the trusted list (false: none configured)
		peer    string
		xff     []string
		want    string
	}{
		{"no proxies configured: XFF ignored", false, "198.51.100.7:5555", []string{"203.0.113.1"}, "198.51.100.7"},
		{"spoofed XFF from an untrusted peer ignored", true, "198.51.100.7:5555", []string{"10.0.0.1, 203.0.113.1"}, "198.51.100.7"},
		{"trusted peer, no XFF: the peer", true, "10.213.7.10:40000", nil, "10.213.7.10"},
		{"trusted peer: its entry for the client", true, "10.213.7.10:40000", []string{"203.0.113.9"}, "203.0.113.9"},
		{"client-sent entries left of the proxy's are not used", true, "10.213.7.10:40000", []string{"1.2.3.4, 5.6.7.8, 203.0.113.9"}, "203.0.113.9"},
		{"chain of trusted proxies: the right-most untrusted", true, "10.213.7.10:40000", []string{"1.2.3.4, 203.0.113.9, 10.1.2.3, 10.4.5.6"}, "203.0.113.9"},
		{"chain across several headers", true, "10.213.7.10:40000", []string{"1.2.3.4, 203.0.113.9", "10.1.2.3", "10.4.5.6"}, "203.0.113.9"},
		{"every entry trusted: the left-most", true, "10.213.7.10:40000", []string{"10.9.9.9, 10.1.2.3"}, "10.9.9.9"},
		{"malformed right-most entry: the proxy that sent it", true, "10.213.7.10:40000", []string{"203.0.113.9, not-an-ip"}, "10.213.7.10"},
		{"malformed entry behind a trusted hop: that hop", true, "10.213.7.10:40000", []string{"bogus, 10.1.2.3"}, "10.1.2.3"},
		{"malformed entry left of the client: unused", true, "10.213.7.10:40000", []string{"bogus, 203.0.113.9"}, "203.0.113.9"},
		{"an unknown token is malformed", true, "10.213.7.10:40000", []string{"unknown"}, "10.213.7.10"},
		{"empty entries skipped", true, "10.213.7.10:40000", []string{" , 203.0.113.9 ,, "}, "203.0.113.9"},
		{"an entry with a port", true, "10.213.7.10:40000", []string{"203.0.113.9:4711"}, "203.0.113.9"},
		{"an IPv6 entry with a port", true, "10.213.7.10:40000", []string{"[2001:db8::1]:4711"}, "2001:db8::1"},
		{"an IPv4-mapped entry is the IPv4 address", true, "10.213.7.10:40000", []string{"::ffff:203.0.113.9"}, "203.0.113.9"},
		{"an IPv4-mapped trusted peer is trusted", true, "[::ffff:10.213.7.10]:40000", []string{"203.0.113.9"}, "203.0.113.9"},
		{"an IPv4-mapped trusted hop is trusted", true, "10.213.7.10:40000", []string{"203.0.113.9, ::ffff:10.1.2.3"}, "203.0.113.9"},
		{"IPv6 trusted proxy", true, "[fd00::5]:40000", []string{"2001:db8::7"}, "2001:db8::7"},
		{"a zoned entry is malformed", true, "10.213.7.10:40000", []string{"fe80::1%eth0"}, "10.213.7.10"},
		{"a peer that is not an address: as it is", true, "@unix", []string{"203.0.113.9"}, "@unix"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/v1/orders", nil)
			r.RemoteAddr = c.peer
			for _, v := range c.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			list := trusted
			if !c.trusted {
				list = nil
			}
			if got := ClientIP(r, list); got != c.want {
				t.Errorf("ClientIP(peer %s, XFF %q) = %s, want %s", c.peer, c.xff, got, c.want)
			}
		})
	}
}

func TestParseTrustedProxies(t *testing.T) {
	got, err := ParseTrustedProxies([]string{"10.213.7.10", "10.1.2.3/8", "::ffff:192.0.2.1", "fd00::/8"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.213.7.10/32", "10.0.0.0/8", "192.0.2.1/32", "fd00::/8"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("entry %d = %s, want %s", i, got[i], want[i])
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "proxy.example", "10.0.0.1-10.0.0.9"} {
		if _, err := ParseTrustedProxies([]string{bad}); err == nil {
			t.Errorf("ParseTrustedProxies(%q) accepted it", bad)
		}
	}
}

// TestIPLimitBehindATrustedProxy: behind the load balancer each client
// spends its own budget, and a client's own X-Forwarded-For changes
// nothing, whether it comes through the proxy or straight to the gateway.
func TestIPLimitBehindATrustedProxy(t *testing.T) {
	trusted, _ := ParseTrustedProxies([]string{"10.213.7.10"})
	ips := &budget{left: map[string]int{"203.0.113.1": 1, "203.0.113.2": 1, "10.213.7.10": 0, "198.51.100.7": 0}}
	s := &Server{Orders: &acceptAll{}, IPLimit: ips, TrustedProxies: trusted}
	h := s.Handler()
	post := func(peer string, xff ...string) int {
		body := `{"sku":"sku-1","qty":1,"customer_id":"c"}`
		req := httptest.NewRequest(http.MethodPost, "/v1/orders", strings.NewReader(body))
		req.Header.Set("Idempotency-Key", "k1")
		req.RemoteAddr = peer
		for _, v := range xff {
			req.Header.Add("X-Forwarded-For", v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	for _, c := range []struct {
		name string
		code int
		peer string
		xff  []string
	}{
		{"first client through the proxy", 202, "10.213.7.10:1", []string{"203.0.113.1"}},
		{"second client through the proxy, its own budget", 202, "10.213.7.10:2", []string{"203.0.113.2"}},
		{"first client again, its budget spent", 429, "10.213.7.10:3", []string{"203.0.113.1"}},
		{"first client naming a fresh address left of the proxy's entry", 429, "10.213.7.10:4", []string{"192.0.2.99, 203.0.113.1"}},
		{"an untrusted peer naming a fresh address", 429, "198.51.100.7:5", []string{"192.0.2.99"}},
	} {
		if got := post(c.peer, c.xff...); got != c.code {
			t.Errorf("%s: %d, want %d", c.name, got, c.code)
		}
	}
}
