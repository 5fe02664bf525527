package testkit

import (
	"strings"
	"testing"
)

// Help is what a service's --help must say: its usage starts with Prefix,
// holds every Want, and never shows Hidden (a secret's default).
type Help struct {
	Prefix string
	Want   []string
	Hidden string
}

// CheckHelp runs bin with --help, -h, help, migrate --help and -help under
// a configuration that would not load: each must print h's usage on
// stdout, nothing on stderr, and exit 0.
func CheckHelp(t *testing.T, bin string, h Help) {
	t.Helper()
	broken := []string{"SURGE_IDEMPOTENCY_TTL=forever"}
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"migrate", "--help"}, {"-help"}} {
		code, out, stderr := Run(t, bin, broken, args...)
		if code != 0 || stderr != "" || !strings.HasPrefix(out, h.Prefix) {
			t.Errorf("%v: exit %d, stderr %q\n%s", args, code, stderr, out)
			continue
		}
		for _, want := range h.Want {
			if !strings.Contains(out, want) {
				t.Errorf("%v: usage lacks %q:\n%s", args, want, out)
			}
		}
		if strings.Contains(out, h.Hidden) {
			t.Errorf("%v: usage shows a secret's default %q:\n%s", args, h.Hidden, out)
		}
	}
}

// Refusal is a command line a program must refuse, and what it says.
type Refusal struct {
	Args []string
	Msg  string
}

// CheckRefused runs bin with each command line, every engine pointing at
// a closed port: each must exit 2 with nothing on stdout and a message on
// stderr holding its Msg and "<program> --help", before any dial.
func CheckRefused(t *testing.T, bin, program string, cases []Refusal) {
	t.Helper()
	down := []string{"SURGE_REDIS_ADDRS=127.0.0.1:1", "SURGE_MYSQL_DSN=root@tcp(127.0.0.1:1)/surge",
		"SURGE_AMQP_URL=amqp://guest:guest@127.0.0.1:1/"}
	for _, c := range cases {
		code, out, stderr := Run(t, bin, down, c.Args...)
		if code != 2 || out != "" || !strings.Contains(stderr, c.Msg) || !strings.Contains(stderr, program+" --help") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 saying %q", c.Args, code, out, stderr, c.Msg)
		}
	}
}
