package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"surge/pkg/config"
)

// gatewayLike has the secrets every service reads, and one in a named
// struct, whose variables envconfig prefixes with the struct's name.
type gatewayLike struct {
	config.Common
	AdminToken string `envconfig:"ADMIN_TOKEN" default:"surge-admin" secret:"true"`
	Nested     struct {
		Key string `envconfig:"KEY" secret:"true"`
	} `envconfig:"VAULT"`
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSecretsFromFiles: each secret comes from SURGE_<NAME>_FILE, without
// its trailing newline; secrets whose file is not set keep their value.
func TestSecretsFromFiles(t *testing.T) {
	t.Setenv("SURGE_REDIS_PASSWORD_FILE", writeFile(t, "redis-pw\n"))
	t.Setenv("SURGE_AMQP_URL_FILE", writeFile(t, "amqp://u:p@mq:5672/\r\n"))
	t.Setenv("SURGE_MYSQL_DSN_FILE", writeFile(t, "u:p@tcp(db:3306)/surge"))
	t.Setenv("SURGE_ADMIN_TOKEN_FILE", writeFile(t, "  spaces kept inside  \n"))
	t.Setenv("SURGE_VAULT_KEY_FILE", writeFile(t, "nested\n"))
	var cfg gatewayLike
	if err := config.Load(&cfg); err != nil {
		t.Fatal(err)
	}
	got := []string{cfg.Redis.Password, cfg.AMQP.URL, cfg.MySQL.DSN, cfg.AdminToken, cfg.Nested.Key}
	want := []string{"redis-pw", "amqp://u:p@mq:5672/", "u:p@tcp(db:3306)/surge", "  spaces kept inside  ", "nested"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("secret %d = %q, want %q", i, got[i], want[i])
		}
	}

	t.Setenv("SURGE_REDIS_PASSWORD_FILE", "")
	os.Unsetenv("SURGE_REDIS_PASSWORD_FILE")
	t.Setenv("SURGE_REDIS_PASSWORD", "from-env")
	var plain gatewayLike
	if err := config.Load(&plain); err != nil {
		t.Fatal(err)
	}
	if plain.Redis.Password != "from-env" || plain.AdminToken != "  spaces kept inside  " {
		t.Errorf("password %q, token %q", plain.Redis.Password, plain.AdminToken)
	}
}

// TestSecretFileMistakes: each mistake stops the load with an error naming
// the variable.
func TestSecretFileMistakes(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"both set", map[string]string{"SURGE_MYSQL_DSN": "root@tcp(h)/x", "SURGE_MYSQL_DSN_FILE": writeFile(t, "dsn")},
			[]string{"SURGE_MYSQL_DSN and SURGE_MYSQL_DSN_FILE are both set"}},
		{"both set, even empty", map[string]string{"SURGE_ADMIN_TOKEN": "", "SURGE_ADMIN_TOKEN_FILE": writeFile(t, "tok")},
			[]string{"SURGE_ADMIN_TOKEN and SURGE_ADMIN_TOKEN_FILE are both set"}},
		{"unreadable", map[string]string{"SURGE_REDIS_PASSWORD_FILE": "/nonexistent/surge/pw"},
			[]string{"SURGE_REDIS_PASSWORD_FILE", "/nonexistent/surge/pw", "no such file"}},
		{"a directory", map[string]string{"SURGE_AMQP_URL_FILE": t.TempDir()},
			[]string{"SURGE_AMQP_URL_FILE", "is a directory"}},
		{"empty file", map[string]string{"SURGE_AMQP_URL_FILE": writeFile(t, "\n")},
			[]string{"SURGE_AMQP_URL_FILE", "the file is empty"}},
		{"empty name", map[string]string{"SURGE_VAULT_KEY_FILE": ""},
			[]string{"SURGE_VAULT_KEY_FILE is empty"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			var cfg gatewayLike
			err := config.Load(&cfg)
			for _, w := range c.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Fatalf("load: %v, want an error saying %q", err, w)
				}
			}
		})
	}
}

// TestOnlySecretsFromFiles: a setting not marked secret has no _FILE
// variant (SURGE_LOG_LEVEL_FILE means nothing).
func TestOnlySecretsFromFiles(t *testing.T) {
	t.Setenv("SURGE_LOG_LEVEL_FILE", writeFile(t, "debug"))
	var cfg gatewayLike
	if err := config.Load(&cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.LogLevel != "info" {
		t.Fatalf("log level %q, want the default", cfg.LogLevel)
	}
}
