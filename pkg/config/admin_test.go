package config_test

import (
	"strings"
	"testing"

	"surge/pkg/config"
)

func TestCheckAdminToken(t *testing.T) {
	const strong = "0123456789abcdef" // 16 characters
	cases := []struct {
		addr, token string
		want        string // "" accepts
	}{
		{"127.0.0.1:8080", "surge-admin", ""},
		{"127.1.2.3:8080", "short", ""},
		{"[::1]:8080", "surge-admin", ""},
		{"localhost:8080", "surge-admin", ""},
		{"LOCALHOST:8080", "", ""},
		{"0.0.0.0:8080", "surge-admin", `SURGE_ADMIN_TOKEN is the default "surge-admin"`},
		{":8080", "surge-admin", `SURGE_ADMIN_TOKEN is the default`},
		{"[::]:8080", "surge-admin", `SURGE_ADMIN_TOKEN is the default`},
		{"10.0.0.5:8080", "fifteen-chars!!", "SURGE_ADMIN_TOKEN has 15 characters, fewer than 16"},
		{"gateway.internal:8080", "", "SURGE_ADMIN_TOKEN has 0 characters"},
		{"0.0.0.0:8080", strong, ""},
		{":8080", strong + strong, ""},
	}
	for _, c := range cases {
		err := config.CheckAdminToken(c.addr, c.token)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("CheckAdminToken(%q, %q) = %v, want accepted", c.addr, c.token, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("CheckAdminToken(%q, %q) = %v, want %q", c.addr, c.token, err, c.want)
		case c.want != "" && !strings.Contains(err.Error(), "SURGE_ADMIN_TOKEN_FILE") ||
			c.want != "" && !strings.Contains(err.Error(), "not a loopback address"):
			t.Errorf("CheckAdminToken(%q, %q) = %v: the message must say why and how to fix it", c.addr, c.token, err)
		}
	}
}

// TestPlaceholderAdminTokenRefused: a token still holding a placeholder of the deployment
// files (REPLACE-ME, changeme, ...) is refused on every address, loopback included: it was
// never meant to run, and a long placeholder would pass the length rule.
func TestPlaceholderAdminTokenRefused(t *testing.T) {
	for _, token := range []string{
		"REPLACE-ME-admin-token-of-32-random-characters",
		"replace-me-with-openssl-rand-hex-32",
		"REPLACE_ME_0123456789abcdef",
		"changeme-changeme-changeme",
		"ChangeMe0123456789abcdef",
		"change-me-0123456789abcdef",
		"<admin-token-0123456789abcdef>",
		"0123456789abcdef-placeholder",
		"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	} {
		for _, addr := range []string{"0.0.0.0:8081", "127.0.0.1:8081"} {
			err := config.CheckAdminToken(addr, token)
			if err == nil || !strings.Contains(err.Error(), "placeholder") || !strings.Contains(err.Error(), "SURGE_ADMIN_TOKEN_FILE") {
				t.Errorf("CheckAdminToken(%q, %q) = %v, want a placeholder refused with how to fix it", addr, token, err)
			}
		}
	}
	for _, token := range []string{"9f3c1a7e5b2d48c0a6e1f9b3d7c2e5a8", "replacement-policy-token-0123"} {
		if err := config.CheckAdminToken("0.0.0.0:8081", token); err != nil {
			t.Errorf("CheckAdminToken(%q) = %v, want accepted", token, err)
		}
	}
}
