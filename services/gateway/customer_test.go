package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestRefusesWeakCustomerTokenSettings: the gateway does not start with
// customer-token settings that would check tokens weakly or ambiguously,
// and says which variable to fix, before it opens any engine.
func TestRefusesWeakCustomerTokenSettings(t *testing.T) {
	cases := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"SURGE_CUSTOMER_JWT_SECRET": "too-short", "SURGE_CUSTOMER_JWT_AUDIENCE": "shop"},
			"SURGE_CUSTOMER_JWT_SECRET has 9 bytes, fewer than 32"},
		{map[string]string{"SURGE_CUSTOMER_JWT_SECRET": strings.Repeat("s", 32)},
			"SURGE_CUSTOMER_JWT_AUDIENCE is not set"},
		{map[string]string{"SURGE_CUSTOMER_JWT_SECRET": strings.Repeat("s", 32), "SURGE_CUSTOMER_JWT_AUDIENCE": "shop",
			"SURGE_CUSTOMER_JWKS_URL": "https://id.shop.example/jwks.json"}, "are both set"},
	}
	for _, c := range cases {
		t.Setenv("SURGE_HTTP_ADDR", "127.0.0.1:0")
		t.Setenv("SURGE_ADMIN_ADDR", "127.0.0.1:0")
		for _, k := range []string{"SURGE_CUSTOMER_JWT_SECRET", "SURGE_CUSTOMER_JWT_AUDIENCE", "SURGE_CUSTOMER_JWKS_URL"} {
			t.Setenv(k, c.env[k])
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err := run(ctx, nil)
		cancel()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want the gateway refused with %q", c.env, err, c.want)
		}
	}
}
