package config

import (
	"fmt"
	"net"
	"strings"
)

// DefaultAdminToken is SURGE_ADMIN_TOKEN's default, for a local run only.
const DefaultAdminToken = "surge-admin"

// MinAdminTokenLen is the shortest admin token accepted where the admin
// API can be reached from another machine.
const MinAdminTokenLen = 16

// WeakAdminToken says why token must not guard an admin API reachable
// from the network: it is the published default, or too short to resist
// guessing. It returns nil for a token fit for production.
func WeakAdminToken(token string) error {
	const fix = "set SURGE_ADMIN_TOKEN (or SURGE_ADMIN_TOKEN_FILE) to a random secret of at least 16 characters, e.g. `openssl rand -hex 32`"
	switch {
	case token == DefaultAdminToken:
		return fmt.Errorf("SURGE_ADMIN_TOKEN is the default %q, which anyone can read in surge's documentation: %s",
			DefaultAdminToken, fix)
	case len(token) < MinAdminTokenLen:
		return fmt.Errorf("SURGE_ADMIN_TOKEN has %d characters, fewer than %d: %s", len(token), MinAdminTokenLen, fix)
	}
	return nil
}

// CheckAdminToken refuses a weak admin token (WeakAdminToken) when addr,
// the address the admin API listens on, is not a loopback one: there the
// token is all that stands between the network and the stock. On
// 127.0.0.0/8, ::1 or localhost the default stays accepted, for local
// runs. An empty host (":8080") listens on every interface, so it is not
// loopback.
func CheckAdminToken(addr, token string) error {
	if IsLoopback(addr) {
		return nil
	}
	if err := WeakAdminToken(token); err != nil {
		return fmt.Errorf("the admin API is reachable from the network (%q is not a loopback address): %w; or listen on 127.0.0.1", addr, err)
	}
	return nil
}

// IsLoopback reports whether the listen address addr (host:port, or a
// bare host) only accepts connections from this machine.
func IsLoopback(addr string) bool {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
