package config

import (
	"fmt"
	"net"
	"regexp"
	"strings"
)

// DefaultAdminToken is SURGE_ADMIN_TOKEN's default, for a local run only.
const DefaultAdminToken = "surge-admin"

// MinAdminTokenLen is the shortest admin token accepted where the admin
// API can be reached from another machine.
const MinAdminTokenLen = 16

// WeakAdminToken says why token must not guard an admin API reachable
// from the network: it is a placeholder (PlaceholderAdminToken), the
// published default, or too short to resist guessing. It returns nil for a
// token fit for production.
func WeakAdminToken(token string) error {
	if err := PlaceholderAdminToken(token); err != nil {
		return err
	}
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

// placeholderWords are the words deployment files put where a secret
// belongs (REPLACE-ME, changeme, placeholder), as whole words in any case
// and with or without a separator, so "replacement" is not one.
var placeholderWords = regexp.MustCompile(`(?i)(^|[^a-z])(replace[-_ .]?me|change[-_ .]?me|placeholder)([^a-z]|$)`)

// PlaceholderAdminToken says why token is a placeholder rather than a
// secret: it holds a placeholder word, is wrapped in angle brackets
// ("<admin-token>"), or repeats one character. Such a token was copied
// from an example and never meant to run, and a long one would pass the
// length rule, so the gateway refuses it on every address. It returns nil
// for any other token.
func PlaceholderAdminToken(token string) error {
	const fix = "set SURGE_ADMIN_TOKEN (or SURGE_ADMIN_TOKEN_FILE) to a random secret, e.g. `openssl rand -hex 32`"
	var why string
	switch {
	case placeholderWords.MatchString(token):
		why = fmt.Sprintf("holds the placeholder word %q", strings.Trim(placeholderWords.FindString(token), "-_. <>"))
	case len(token) > 2 && strings.HasPrefix(token, "<") && strings.HasSuffix(token, ">"):
		why = "is wrapped in angle brackets"
	case len(token) > 1 && strings.Count(token, token[:1]) == len(token):
		why = "repeats one character"
	default:
		return nil
	}
	return fmt.Errorf("SURGE_ADMIN_TOKEN is a placeholder (it %s), not a secret: %s", why, fix)
}

// CheckAdminToken refuses a placeholder admin token (PlaceholderAdminToken)
// on any address, and a weak one (WeakAdminToken) when addr,
// the address the admin API listens on, is not a loopback one: there the
// token is all that stands between the network and the stock. On
// 127.0.0.0/8, ::1 or localhost the default stays accepted, for local
// runs. An empty host (":8080") listens on every interface, so it is not
// loopback.
func CheckAdminToken(addr, token string) error {
	if err := PlaceholderAdminToken(token); err != nil {
		return err
	}
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
