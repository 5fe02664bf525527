package httpapi

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ParseTrustedProxies reads SURGE_TRUSTED_PROXIES: CIDRs (10.0.0.0/8,
// fd00::/8) or single addresses (a /32 or /128).
func ParseTrustedProxies(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q: not a CIDR or an address", s)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// ClientIP is the address a request came from, for the per-IP limit.
//
// It is the peer's address, unless the peer is one of trusted (a proxy
// such as the load balancer in front of the gateways). Then it is the
// right-most entry of X-Forwarded-For that is not itself a trusted proxy:
// each proxy appends the address of the peer it got the request from, so
// entries right of that one were written by proxies of ours and it is the
// first one no proxy of ours vouches for. Entries further left are what
// the client chose to send and are never used.
//
// The walk never ends on a name the client could choose: an entry that
// is not an address stops it, and the request counts against the last
// trusted hop, the proxy that handed on the malformed header. When every
// entry is trusted, the left-most is the client (a caller inside the
// proxies' network).
func ClientIP(r *http.Request, trusted []netip.Prefix) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil || !isTrusted(peer, trusted) {
		return host
	}
	client := peer.Unmap()
	values := r.Header.Values("X-Forwarded-For")
	for i := len(values) - 1; i >= 0; i-- {
		entries := strings.Split(values[i], ",")
		for j := len(entries) - 1; j >= 0; j-- {
			e := strings.TrimSpace(entries[j])
			if e == "" {
				continue
			}
			a, ok := parseForwarded(e)
			if !ok {
				return client.String()
			}
			client = a
			if !isTrusted(a, trusted) {
				return a.String()
			}
		}
	}
	return client.String()
}

// parseForwarded reads one X-Forwarded-For entry: an address, possibly
// with a port ("192.0.2.1:4711", "[2001:db8::1]:4711").
func parseForwarded(e string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(e); err == nil && a.Zone() == "" {
		return a.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(e); err == nil && ap.Addr().Zone() == "" {
		return ap.Addr().Unmap(), true
	}
	return netip.Addr{}, false
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	a = a.Unmap()
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
