package main

import (
	"sort"
	"strings"
	"testing"
)

// TestCommandHelp: every command answers --help, -h and `opsctl help
// COMMAND` with its usage and flags on stdout and exit 0, before reading
// the configuration (a broken one here) or reaching any engine.
func TestCommandHelp(t *testing.T) {
	t.Setenv("SURGE_IDEMPOTENCY_TTL", "forever")
	flags := map[string][]string{
		"stock":     {"--stock N", "--name S", "--price-cents N", "--max-per-customer N", "--json"},
		"dlq":       {"--json", "--reason R", "--since T", "--all", "--dry-run"},
		"reconcile": {"--sku S", "--dry-run", "--json", "--detailed-exitcode"},
		"preflight": {"--json", "--skip-host"},
		"exporter":  {"--addr A"},
		"migrate":   {},
	}
	var names []string
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		want, ok := flags[name]
		if !ok {
			t.Errorf("command %s has no help test: add its flags here", name)
			continue
		}
		for _, args := range [][]string{{name, "--help"}, {name, "-h"}, {"help", name}, {name, "load", "x", "--help"}} {
			code, out, stderr := runOpsctl(args...)
			if code != exitOK || stderr != "" || !strings.HasPrefix(out, "usage: opsctl "+name) {
				t.Errorf("%v: exit %d, stderr %q, stdout %q; want exit 0 and the usage", args, code, stderr, out)
				continue
			}
			for _, f := range want {
				if !strings.Contains(out, "\n  "+f) {
					t.Errorf("%v: usage does not list %s:\n%s", args, f, out)
				}
			}
		}
	}
	code, out, _ := runOpsctl("--version")
	if code != exitOK || !strings.HasPrefix(out, "opsctl version ") || !strings.Contains(out, " go1.") {
		t.Errorf("--version: exit %d, %q", code, out)
	}
	if code, out, _ := runOpsctl("help"); code != exitOK || !strings.Contains(out, "opsctl COMMAND --help") {
		t.Errorf("help: exit %d\n%s", code, out)
	}
}
