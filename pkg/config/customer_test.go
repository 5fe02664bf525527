package config_test

import (
	"strings"
	"testing"

	"surge/pkg/config"
)

// customerConfig is a gateway's configuration as far as customer tokens
// go, validated the same way.
type customerConfig struct {
	config.Common
	config.CustomerAuth
}

func (c *customerConfig) Validate() error {
	if err := c.Common.Validate(); err != nil {
		return err
	}
	return c.CustomerAuth.Validate()
}

// TestCustomerAuthSettings: customer tokens are off by default; each
// setting that would check tokens weakly or ambiguously stops the load
// with the variable to fix; the secret may come from its file.
func TestCustomerAuthSettings(t *testing.T) {
	const secret = "0123456789abcdef0123456789abcdef" // 32 bytes
	load := func(env map[string]string) (config.CustomerAuth, error) {
		t.Helper()
		for _, k := range []string{"SURGE_CUSTOMER_JWT_SECRET", "SURGE_CUSTOMER_JWKS_URL",
			"SURGE_CUSTOMER_JWT_AUDIENCE", "SURGE_CUSTOMER_JWT_ISSUER", "SURGE_CUSTOMER_JWKS_REFRESH"} {
			t.Setenv(k, env[k])
		}
		var cfg customerConfig
		err := config.Load(&cfg)
		return cfg.CustomerAuth, err
	}
	c, err := load(map[string]string{"SURGE_CUSTOMER_JWKS_REFRESH": "1h"})
	if err != nil || c.Enabled() {
		t.Fatalf("default: %v, enabled %v; want off", err, c.Enabled())
	}
	c, err = load(map[string]string{"SURGE_CUSTOMER_JWT_SECRET": secret, "SURGE_CUSTOMER_JWT_AUDIENCE": "shop",
		"SURGE_CUSTOMER_JWKS_REFRESH": "1h"})
	if err != nil || !c.Enabled() || c.JWTSecret != secret {
		t.Fatalf("secret: %v %+v", err, c)
	}
	c, err = load(map[string]string{"SURGE_CUSTOMER_JWKS_URL": "https://id.shop.example/.well-known/jwks.json",
		"SURGE_CUSTOMER_JWT_AUDIENCE": "shop", "SURGE_CUSTOMER_JWKS_REFRESH": "15m"})
	if err != nil || !c.Enabled() {
		t.Fatalf("key set: %v %+v", err, c)
	}
	if _, err = load(map[string]string{"SURGE_CUSTOMER_JWKS_URL": "http://127.0.0.1:9000/jwks",
		"SURGE_CUSTOMER_JWT_AUDIENCE": "shop", "SURGE_CUSTOMER_JWKS_REFRESH": "1h"}); err != nil {
		t.Fatalf("http on loopback: %v", err)
	}

	mistakes := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"SURGE_CUSTOMER_JWT_SECRET": secret[:31], "SURGE_CUSTOMER_JWT_AUDIENCE": "shop"},
			"SURGE_CUSTOMER_JWT_SECRET has 31 bytes, fewer than 32"},
		{map[string]string{"SURGE_CUSTOMER_JWT_SECRET": secret, "SURGE_CUSTOMER_JWKS_URL": "https://id.example/jwks",
			"SURGE_CUSTOMER_JWT_AUDIENCE": "shop"}, "are both set: set one"},
		{map[string]string{"SURGE_CUSTOMER_JWT_SECRET": secret}, "SURGE_CUSTOMER_JWT_AUDIENCE is not set"},
		{map[string]string{"SURGE_CUSTOMER_JWKS_URL": "http://id.shop.example/jwks", "SURGE_CUSTOMER_JWT_AUDIENCE": "shop"},
			"must be https"},
		{map[string]string{"SURGE_CUSTOMER_JWKS_URL": "id.shop.example/jwks", "SURGE_CUSTOMER_JWT_AUDIENCE": "shop"},
			"not an absolute URL"},
		{map[string]string{"SURGE_CUSTOMER_JWKS_URL": "https://id.example/jwks", "SURGE_CUSTOMER_JWT_AUDIENCE": "shop",
			"SURGE_CUSTOMER_JWKS_REFRESH": "10s"}, "SURGE_CUSTOMER_JWKS_REFRESH=10s: must be at least 1m"},
		{map[string]string{"SURGE_CUSTOMER_JWT_AUDIENCE": "shop"}, "but no key is"},
	}
	for _, m := range mistakes {
		if m.env["SURGE_CUSTOMER_JWKS_REFRESH"] == "" {
			m.env["SURGE_CUSTOMER_JWKS_REFRESH"] = "1h"
		}
		if _, err := load(m.env); err == nil || !strings.Contains(err.Error(), m.want) {
			t.Errorf("%v: %v, want %q", m.env, err, m.want)
		}
	}

	t.Setenv("SURGE_CUSTOMER_JWT_SECRET_FILE", writeFile(t, secret+"\n"))
	var cfg customerConfig
	t.Setenv("SURGE_CUSTOMER_JWT_AUDIENCE", "shop")
	t.Setenv("SURGE_CUSTOMER_JWT_SECRET", "")
	if err := config.Load(&cfg); err == nil || !strings.Contains(err.Error(), "are both set") {
		t.Fatalf("secret and its file: %v", err)
	}
}

// TestCustomerSecretFromFile: SURGE_CUSTOMER_JWT_SECRET_FILE, like the
// other secrets' files.
func TestCustomerSecretFromFile(t *testing.T) {
	const secret = "0123456789abcdef0123456789abcdef"
	t.Setenv("SURGE_CUSTOMER_JWT_SECRET_FILE", writeFile(t, secret+"\n"))
	t.Setenv("SURGE_CUSTOMER_JWT_AUDIENCE", "shop")
	var cfg customerConfig
	if err := config.Load(&cfg); err != nil || cfg.JWTSecret != secret {
		t.Fatalf("load: %v, secret %q", err, cfg.JWTSecret)
	}
}
