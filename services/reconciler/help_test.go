package main

import (
	"os"
	"strings"
	"testing"

	"surge/internal/testkit"
)

func TestMain(m *testing.M) { os.Exit(testkit.RunWithBinaries(m)) }

// TestHelpBinary: the built reconciler answers --help with its commands,
// once's flags and exit codes and every SURGE_ variable it reads, exit 0,
// without reading the configuration (a broken one here); a command line
// it cannot take exits 2 before any engine is dialled (none is
// reachable).
func TestHelpBinary(t *testing.T) {
	bin := testkit.Binary(t, "surge/services/reconciler")
	code, out, stderr := testkit.Run(t, bin, []string{"SURGE_IDEMPOTENCY_TTL=forever"}, "--help")
	if code != 0 || stderr != "" {
		t.Fatalf("--help: exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{"reconciler once [FLAGS]", "--detailed-exitcode", "SURGE_RECONCILE_EVERY  ", "30s",
		"SURGE_RECONCILE_METRICS_ADDR", "SURGE_REDIS_ADDRS", "SURGE_MYSQL_DSN  ", "secret, or SURGE_MYSQL_DSN_FILE"} {
		if !strings.Contains(out, want) {
			t.Errorf("usage lacks %q:\n%s", want, out)
		}
	}
	down := []string{"SURGE_REDIS_ADDRS=127.0.0.1:1", "SURGE_MYSQL_DSN=root@tcp(127.0.0.1:1)/surge"}
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"bogus"}, `unknown command "bogus" (want once or serve)`},
		{[]string{"serve", "--sku", "x"}, `unexpected argument "--sku"`},
		{[]string{"once", "--skus", "x"}, "flag provided but not defined: -skus"},
	} {
		code, out, stderr := testkit.Run(t, bin, down, c.args...)
		if code != 2 || !strings.Contains(stderr, c.msg) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 saying %q", c.args, code, out, stderr, c.msg)
		}
	}
}
