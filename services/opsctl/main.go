// Command opsctl is the operations tool: load and watch stock, work the
// dead-letter queue, check a deployment against the production checklist.
//
//	opsctl migrate
//	opsctl stock load SKU --stock N [--name S] [--price-cents N] [--json]
//	opsctl stock show SKU [--json]
//	opsctl dlq list|show|replay|discard ...   (opsctl dlq help)
//	opsctl reconcile [--sku S]... [--dry-run] [--json]
//
// Other commands are listed by `opsctl help`. Exit codes: 0 success, 1 the
// operation failed or found a failing check, 2 a usage mistake, 3 a
// dependency (Redis, RabbitMQ, MySQL) is unreachable, 4 a named object (a
// dead letter id) does not exist. reconcile keeps the codes of `reconciler
// once` instead, where 1 means repaired (opsctl reconcile help).
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
)

// Exit codes scripts can rely on.
const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2
	exitUnavailable = 3
	exitNotFound    = 4
)

// command is one opsctl subcommand. run gets the arguments after its name.
type command struct {
	summary string
	run     func(ctx context.Context, env *env, args []string) error
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
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		printUsage(stdout)
		return exitOK
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "opsctl: unknown command %q (see opsctl help)\n", args[0])
		return exitUsage
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
	fmt.Fprintln(w, "\nexit codes: 0 ok, 1 failed, 2 usage mistake, 3 a dependency is unreachable, 4 not found")
	fmt.Fprintln(w, "(reconcile has its own, those of reconciler once: opsctl reconcile help)")
}
