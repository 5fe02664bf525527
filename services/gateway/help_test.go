package main

import (
	"os"
	"strings"
	"testing"

	"surge/internal/testkit"
)

func TestMain(m *testing.M) { os.Exit(testkit.RunWithBinaries(m)) }

// TestHelp: --help, -h and help print the usage with every SURGE_
// variable the gateway reads, exit 0, without reading the configuration
// (a broken one here); a secret's default is not shown.
func TestHelp(t *testing.T) {
	bin := testkit.Binary(t, "surge/services/gateway")
	broken := []string{"SURGE_IDEMPOTENCY_TTL=forever"}
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"migrate", "--help"}, {"-help"}} {
		code, out, stderr := testkit.Run(t, bin, broken, args...)
		if code != 0 || stderr != "" || !strings.HasPrefix(out, "usage:\n  gateway [serve]") {
			t.Errorf("%v: exit %d, stderr %q\n%s", args, code, stderr, out)
			continue
		}
		for _, want := range []string{"gateway migrate", "gateway --version", "SURGE_HTTP_ADDR  ", "127.0.0.1:8080",
			"SURGE_ADMIN_ADDR", "SURGE_MYSQL_DSN", "SURGE_RATE_LIMIT_", "SURGE_CUSTOMER_JWT_", "SURGE_PPROF_ADDR",
			"SURGE_ADMIN_TOKEN  ", "secret, or SURGE_ADMIN_TOKEN_FILE"} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: usage lacks %q:\n%s", args, want, out)
			}
		}
		if strings.Contains(out, "surge-admin") {
			t.Errorf("%v: usage shows the admin token's default:\n%s", args, out)
		}
	}
}

// TestUnknownArguments: a command line the gateway cannot take exits 2
// naming what is wrong, before any engine is dialled (none is reachable).
func TestUnknownArguments(t *testing.T) {
	bin := testkit.Binary(t, "surge/services/gateway")
	down := []string{"SURGE_REDIS_ADDRS=127.0.0.1:1", "SURGE_MYSQL_DSN=root@tcp(127.0.0.1:1)/surge",
		"SURGE_AMQP_URL=amqp://guest:guest@127.0.0.1:1/"}
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"bogus"}, `unknown command "bogus" (want migrate or serve)`},
		{[]string{"--verbose"}, `unknown command "--verbose"`},
		{[]string{"serve", "now"}, `unexpected argument "now"`},
		{[]string{"migrate", "--all"}, `unexpected argument "--all"`},
	} {
		code, out, stderr := testkit.Run(t, bin, down, c.args...)
		if code != 2 || out != "" || !strings.Contains(stderr, c.msg) || !strings.Contains(stderr, "gateway --help") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 saying %q", c.args, code, out, stderr, c.msg)
		}
	}
}
