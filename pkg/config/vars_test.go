package config_test

import (
	"testing"

	"surge/pkg/config"
)

// TestVars lists the variables of Common with their defaults, secrets
// marked, in the names Load reads.
func TestVars(t *testing.T) {
	vars, err := config.Vars(&config.Common{})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]config.Var{}
	for _, v := range vars {
		byName[v.Name] = v
	}
	for name, want := range map[string]config.Var{
		"SURGE_REDIS_PASSWORD": {Name: "SURGE_REDIS_PASSWORD", Default: "surge", Secret: true},
		"SURGE_MYSQL_DSN":      {Name: "SURGE_MYSQL_DSN", Default: "root@tcp(127.0.0.1:3306)/surge", Secret: true},
		"SURGE_LOG_LEVEL":      {Name: "SURGE_LOG_LEVEL", Default: "info"},
		"SURGE_REDIS_USER":     {Name: "SURGE_REDIS_USER"},
	} {
		if got := byName[name]; got != want {
			t.Errorf("%s: %+v, want %+v", name, got, want)
		}
	}
	if len(vars) != len(byName) {
		t.Errorf("%d variables, %d names: a name is listed twice", len(vars), len(byName))
	}
}
