package main

import (
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestCommandHelp: every command answers --help, -h and `opsctl help
// COMMAND` with its usage and flags on stdout and exit 0, before reading
// the configuration (a broken one here) or reaching any engine.
func TestCommandHelp(t *testing.T) {
	t.Setenv("SURGE_IDEMPOTENCY_TTL", "forever")
	flags := map[string][]string{
		"stock":      {"--stock N", "--name S", "--price-cents N", "--max-per-customer N", "--json"},
		"dlq":        {"--json", "--reason R", "--since T", "--all", "--dry-run"},
		"reconcile":  {"--sku S", "--dry-run", "--json", "--detailed-exitcode"},
		"preflight":  {"--json", "--skip-host"},
		"exporter":   {"--addr A"},
		"migrate":    {},
		"completion": {"--no-descriptions"},
	}
	var names []string
	for _, cmd := range (&cli{}).root().Commands() {
		names = append(names, cmd.Name())
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

// TestUsageListsEveryFlag: the usage text a command prints names every
// flag it takes, so a flag added to a command is documented with it.
func TestUsageListsEveryFlag(t *testing.T) {
	var walk func(cmd *cobra.Command)
	walk = func(cmd *cobra.Command) {
		usage := usageOf(cmd)
		cmd.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if f.Name != "help" && !strings.Contains(usage, "--"+f.Name) {
				t.Errorf("%s: its usage does not name --%s:\n%s", cmd.CommandPath(), f.Name, usage)
			}
		})
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	root := (&cli{}).root()
	for _, cmd := range root.Commands() {
		walk(cmd)
	}
}
