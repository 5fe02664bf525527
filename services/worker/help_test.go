package main

import (
	"os"
	"testing"

	"surge/internal/testkit"
)

func TestMain(m *testing.M) { os.Exit(testkit.RunWithBinaries(m)) }

// TestHelp: --help, -h and help print the usage with every SURGE_
// variable the worker reads, exit 0, without reading the configuration
// (a broken one here); a secret's default is not shown.
func TestHelp(t *testing.T) {
	testkit.CheckHelp(t, testkit.Binary(t, "surge/services/worker"), testkit.Help{
		Prefix: "usage:\n  worker [run]",
		Want: []string{"worker migrate", "worker --version", "SURGE_WORKER_PREFETCH  ", "2048",
			"SURGE_WORKER_LIVENESS_GRACE", "SURGE_AMQP_QUEUE", "SURGE_PPROF_ADDR",
			"SURGE_MYSQL_DSN  ", "secret, or SURGE_MYSQL_DSN_FILE"},
		Hidden: "root@tcp(",
	})
}

// TestUnknownArguments: a command line the worker cannot take exits 2
// naming what is wrong, before any engine is dialled (none is reachable).
func TestUnknownArguments(t *testing.T) {
	testkit.CheckRefused(t, testkit.Binary(t, "surge/services/worker"), "worker", []testkit.Refusal{
		{Args: []string{"bogus"}, Msg: `unknown command "bogus" (want migrate or run)`},
		{Args: []string{"--verbose"}, Msg: `unknown command "--verbose"`},
		{Args: []string{"run", "now"}, Msg: `unexpected argument "now"`},
		{Args: []string{"migrate", "--all"}, Msg: `unexpected argument "--all"`},
	})
}
