package main

import (
	"os"
	"testing"

	"surge/internal/testkit"
)

func TestMain(m *testing.M) { os.Exit(testkit.RunWithBinaries(m)) }

// TestHelp: --help, -h and help print the usage with every SURGE_
// variable the gateway reads, exit 0, without reading the configuration
// (a broken one here); a secret's default is not shown.
func TestHelp(t *testing.T) {
	testkit.CheckHelp(t, testkit.Binary(t, "surge/services/gateway"), testkit.Help{
		Prefix: "usage:\n  gateway [serve]",
		Want: []string{"gateway migrate", "gateway --version", "SURGE_HTTP_ADDR  ", "127.0.0.1:8080",
			"SURGE_ADMIN_ADDR", "SURGE_MYSQL_DSN", "SURGE_RATE_LIMIT_", "SURGE_CUSTOMER_JWT_", "SURGE_PPROF_ADDR",
			"SURGE_ADMIN_TOKEN  ", "secret, or SURGE_ADMIN_TOKEN_FILE"},
		Hidden: "surge-admin",
	})
}

// TestUnknownArguments: a command line the gateway cannot take exits 2
// naming what is wrong, before any engine is dialled (none is reachable).
func TestUnknownArguments(t *testing.T) {
	testkit.CheckRefused(t, testkit.Binary(t, "surge/services/gateway"), "gateway", []testkit.Refusal{
		{Args: []string{"bogus"}, Msg: `unknown command "bogus" (want migrate or serve)`},
		{Args: []string{"--verbose"}, Msg: `unknown command "--verbose"`},
		{Args: []string{"serve", "now"}, Msg: `unexpected argument "now"`},
		{Args: []string{"migrate", "--all"}, Msg: `unexpected argument "--all"`},
	})
}
