package config_test

import (
	"path/filepath"
	"strings"
	"testing"

	"surge/internal/testenv"
	"surge/pkg/config"
)

func TestRedisTLSSettings(t *testing.T) {
	files, err := testenv.MakeTLSFiles(filepath.Join(t.TempDir(), "tls"))
	if err != nil {
		t.Fatal(err)
	}
	load := func(env map[string]string) (config.Redis, error) {
		t.Helper()
		for _, k := range []string{"SURGE_REDIS_TLS", "SURGE_REDIS_TLS_CA_FILE", "SURGE_REDIS_TLS_CERT_FILE",
			"SURGE_REDIS_TLS_KEY_FILE", "SURGE_REDIS_TLS_SERVER_NAME"} {
			v, ok := env[k]
			if !ok && k == "SURGE_REDIS_TLS" {
				v = "false"
			}
			t.Setenv(k, v)
		}
		var cfg struct{ config.Common }
		err := config.Load(&cfg)
		return cfg.Redis, err
	}

	r, err := load(nil)
	if err != nil || r.TLSConfig() != nil || r.Options().TLS != nil {
		t.Fatalf("default: %v, TLS %v; want plain TCP", err, r.TLSConfig())
	}
	r, err = load(map[string]string{"SURGE_REDIS_TLS": "true", "SURGE_REDIS_TLS_CA_FILE": files.CA,
		"SURGE_REDIS_TLS_CERT_FILE": files.ClientCert, "SURGE_REDIS_TLS_KEY_FILE": files.ClientKey,
		"SURGE_REDIS_TLS_SERVER_NAME": "redis.internal"})
	if err != nil {
		t.Fatal(err)
	}
	tc := r.Options().TLS
	if tc == nil || tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.ServerName != "redis.internal" {
		t.Fatalf("TLS config %+v", tc)
	}
	if r, err = load(map[string]string{"SURGE_REDIS_TLS": "true"}); err != nil || r.TLSConfig() == nil || r.TLSConfig().RootCAs != nil {
		t.Fatalf("TLS with the system roots: %v", err)
	}

	mistakes := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"SURGE_REDIS_TLS_CA_FILE": files.CA}, "SURGE_REDIS_TLS_CA_FILE is set but SURGE_REDIS_TLS is not true"},
		{map[string]string{"SURGE_REDIS_TLS": "true", "SURGE_REDIS_TLS_CA_FILE": "/nonexistent/ca.crt"}, "SURGE_REDIS_TLS_CA_FILE: read the CA certificate"},
		{map[string]string{"SURGE_REDIS_TLS": "true", "SURGE_REDIS_TLS_CA_FILE": files.ClientKey}, "no PEM certificate"},
		{map[string]string{"SURGE_REDIS_TLS": "true", "SURGE_REDIS_TLS_CERT_FILE": files.ClientCert}, "go together"},
		{map[string]string{"SURGE_REDIS_TLS": "true", "SURGE_REDIS_TLS_CERT_FILE": files.ClientCert,
			"SURGE_REDIS_TLS_KEY_FILE": files.ServerKey}, "load the client certificate"},
	}
	for _, m := range mistakes {
		if _, err := load(m.env); err == nil || !strings.Contains(err.Error(), m.want) {
			t.Errorf("%v: %v, want %q", m.env, err, m.want)
		}
	}
}
