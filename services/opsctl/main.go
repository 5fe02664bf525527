// Command opsctl is the operations tool: load and watch stock, work the
// dead-letter queue, check a deployment against the production checklist.
//
//	opsctl migrate
//	opsctl stock load SKU --stock N [--name S] [--price-cents N] [--max-per-customer N] [--json]
//	opsctl stock show SKU [--json]
//	opsctl dlq list|show|replay|discard ...   (opsctl dlq help)
//	opsctl reconcile [--sku S]... [--dry-run] [--json]
//
// Other commands are listed by `opsctl help`; `opsctl COMMAND --help` (or
// -h, or `opsctl help COMMAND`) prints a command's usage and flags and
// exits 0 without reading the configuration; `opsctl --version` prints the
// build. Exit codes: 0 success, 1 the
// operation failed or found a failing check, 2 a usage mistake, 3 a
// dependency (Redis, RabbitMQ, MySQL) is unreachable, 4 a named object (a
// dead letter id) does not exist. reconcile keeps the codes of `reconciler
// once` instead, where 1 means repaired, with --detailed-exitcode only
// (opsctl reconcile --help).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"

	"surge/pkg/order"
	"surge/pkg/version"
)

// Exit codes scripts can rely on.
const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2
	exitUnavailable = 3
	exitNotFound    = 4
)

// command is one opsctl subcommand. run gets the arguments after its name;
// usage is what --help prints: the synopsis and every flag.
type command struct {
	summary string
	usage   string
	run     func(ctx context.Context, env *env, args []string) error
}

// wantsHelp reports whether a command's arguments ask for its usage:
// "help" first, or -h / --help anywhere (as the flag package reads them).
func wantsHelp(args []string) bool {
	if len(args) > 0 && args[0] == "help" {
		return true
	}
	for _, a := range args {
		switch a {
		case "-h", "-help", "--help":
			return true
		case "--":
			return false
		}
	}
	return false
}

// commands is filled by each file's init: one file per command group.
var commands = map[string]command{}

// usageError marks a mistake in the command line (exit 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// exitError carries an exit code the command chose itself (reconcile
// reports its outcome with it), and the error to print, if any.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e exitError) Unwrap() error { return e.err }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if version.IsFlag(args) {
		_ = version.Print(stdout, "opsctl")
		return exitOK
	}
	if len(args) == 2 && args[0] == "help" {
		args = []string{args[1], "--help"}
	}
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		printUsage(stdout)
		return exitOK
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "opsctl: unknown command %q (see opsctl help)\n", args[0])
		return exitUsage
	}
	if wantsHelp(args[1:]) {
		fmt.Fprintln(stdout, "usage: "+cmd.usage)
		return exitOK
	}
	e, err := newEnv(stdout)
	if err != nil {
		fmt.Fprintln(stderr, "opsctl:", err)
		return exitUsage
	}
	defer e.close()
	err = cmd.run(ctx, e, args[1:])
	if err == nil {
		return exitOK
	}
	var ee exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(stderr, "opsctl:", ee.err)
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "opsctl:", err)
	var ue usageError
	switch {
	case errors.As(err, &ue), errors.Is(err, order.ErrInvalid):
		return exitUsage
	case errors.Is(err, order.ErrUnavailable):
		return exitUnavailable
	case errors.Is(err, order.ErrNotFound), errors.Is(err, order.ErrUnknownSKU):
		return exitNotFound
	}
	return exitFailed
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: opsctl COMMAND [ARGS]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nopsctl COMMAND --help shows a command's flags; opsctl --version the build.")
	fmt.Fprintln(w, "exit codes: 0 ok, 1 failed, 2 usage mistake, 3 a dependency is unreachable, 4 not found")
	fmt.Fprintln(w, "(reconcile has its own, those of reconciler once: opsctl reconcile --help)")
}
