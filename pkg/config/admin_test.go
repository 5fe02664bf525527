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
