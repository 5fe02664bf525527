// Command opsctl is the operations tool: load and watch stock, work the
// dead-letter queue, check a deployment against the production checklist.
//
//	opsctl migrate
//	opsctl stock load SKU --stock N [--name S] [--price-cents N] [--max-per-customer N] [--json]
//	opsctl stock show SKU [--json]
//	opsctl dlq list|show|replay|discard ...   (opsctl dlq --help)
//	opsctl reconcile [--sku S]... [--dry-run] [--json]
//	opsctl completion bash|zsh|fish|powershell
//
// Other commands are listed by `opsctl help`; `opsctl COMMAND --help` (or
// -h, or `opsctl help COMMAND`) prints a command's usage and flags and
// exits 0 without reading the configuration; `opsctl --version` prints the
// build. The command line is parsed (cobra) before anything is read or
// dialled, so a mistake in it never waits on an engine. Exit codes: 0
// success, 1 the operation failed or found a failing check, 2 a usage
// mistake, 3 a dependency (Redis, RabbitMQ, MySQL) is unreachable, 4 a
// named object (a dead letter id, a SKU) does not exist. Under --json a
// failure prints {"error":{"code","message"}} on stdout (errors.go).
// reconcile keeps the codes of `reconciler once` instead, where 1 means
// repaired, with --detailed-exitcode only (opsctl reconcile --help).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

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

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run parses args, runs the command they name and returns the process's
// exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if version.IsFlag(args) {
		_ = version.Print(stdout, "opsctl")
		return exitOK
	}
	args = longFlags(args)
	// `opsctl help COMMAND...` is COMMAND... --help, so that an unknown
	// command is refused as one (cobra's help would list the commands).
	if len(args) > 1 && args[0] == "help" {
		args = append(args[1:len(args):len(args)], "--help")
	}
	c := &cli{stdout: stdout, stderr: stderr}
	defer c.close()
	root := c.root()
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	return report(cmd, err, wantsJSON(args), stdout, stderr)
}

// longFlags accepts the single-dash long flags of Go's flag package, which
// opsctl parsed before (-json, -stock 5), as the double-dash ones; -h
// stays the short help flag. Nothing after "--" is touched.
func longFlags(args []string) []string {
	out := make([]string, len(args))
	copy(out, args)
	for i, a := range out {
		if a == "--" {
			break
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "-"), "=")
		if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && len(name) > 1 && isFlagName(name) {
			out[i] = "-" + a
		}
	}
	return out
}

func isFlagName(s string) bool {
	for i, r := range s {
		if !(r >= 'a' && r <= 'z' || i > 0 && r == '-') {
			return false
		}
	}
	return true
}

// wantsJSON reports whether the command line asks for JSON, read from the
// words themselves so that a line cobra refused still gets its error as
// JSON.
func wantsJSON(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "--json", "--json=true", "--json=1":
			return true
		}
	}
	return false
}

// cli is one run of opsctl: its output and the environment its commands
// open once the command line is known to be right.
type cli struct {
	stdout, stderr io.Writer
	// json is --json, a flag of every command: the reports of stock, dlq,
	// reconcile and preflight as JSON, and any failure as a JSON error.
	json bool
	e    *env
}

// env reads the configuration and returns the environment, the first
// time a command needs it; a configuration that cannot be read is a usage
// mistake (exit 2).
func (c *cli) env() (*env, error) {
	if c.e == nil {
		e, err := newEnv(c.stdout)
		if err != nil {
			return nil, usageError{err.Error()}
		}
		c.e = e
	}
	return c.e, nil
}

func (c *cli) close() {
	if c.e != nil {
		c.e.close()
	}
}

// action wraps a command's work: what it returns is marked as the
// command's own error, so that report tells it from cobra's refusal of the
// command line (always a usage mistake).
func action(fn func(ctx context.Context, cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := fn(cmd.Context(), cmd, args); err != nil {
			return ranError{err}
		}
		return nil
	}
}

// root builds the command tree.
func (c *cli) root() *cobra.Command {
	root := &cobra.Command{
		Use:           "opsctl",
		Short:         "surge's operations tool",
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			printUsage(cmd.OutOrStdout(), cmd)
			return nil
		},
	}
	// Before the completion command, which keeps the writer it is built with.
	root.SetOut(c.stdout)
	root.SetErr(c.stderr)
	root.PersistentFlags().BoolVar(&c.json, "json", false, "print JSON: the report, or the failure as {\"error\":{\"code\",\"message\"}}")
	root.AddCommand(c.migrateCmd(), c.stockCmd(), c.dlqCmd(), c.reconcileCmd(), c.preflightCmd(), c.exporterCmd())
	// cobra's completion command, its shell named as stock's action is.
	root.InitDefaultCompletionCmd()
	if comp, _, err := root.Find([]string{"completion"}); err == nil && comp != root {
		comp.Args, comp.RunE = nil, action(group("completion", "bash, zsh, fish or powershell"))
		comp.Short = "print a shell completion script (completion bash|zsh|fish|powershell)"
		withUsage(comp, completionUsage)
	}
	defaultHelp := root.HelpFunc()
	root.SetHelpFunc(func(cmd *cobra.Command, args []string) {
		switch u := usageOf(cmd); {
		case u != "":
			fmt.Fprintln(cmd.OutOrStdout(), "usage: "+u)
		case cmd == root:
			printUsage(cmd.OutOrStdout(), root)
		default:
			defaultHelp(cmd, args)
		}
	})
	return root
}

const completionUsage = `opsctl completion bash|zsh|fish|powershell
Print the shell completion script of opsctl (commands, flags, dlq replay's --reason):
  bash        source <(opsctl completion bash)   (needs the bash-completion package)
  zsh         opsctl completion zsh > "${fpath[1]}/_opsctl"
  fish        opsctl completion fish > ~/.config/fish/completions/opsctl.fish
  powershell  opsctl completion powershell | Out-String | Invoke-Expression
flags:
  --no-descriptions   leave the commands' descriptions out`

// usageKey is the annotation holding a command's usage text, which its
// subcommands share.
const usageKey = "usage"

// usageOf is the usage text of cmd or of its nearest parent that has one.
func usageOf(cmd *cobra.Command) string {
	for ; cmd != nil; cmd = cmd.Parent() {
		if u := cmd.Annotations[usageKey]; u != "" {
			return u
		}
	}
	return ""
}

// withUsage sets cmd's usage text.
func withUsage(cmd *cobra.Command, usage string) *cobra.Command {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[usageKey] = usage
	return cmd
}

func printUsage(w io.Writer, root *cobra.Command) {
	fmt.Fprintln(w, "usage: opsctl COMMAND [ARGS]\n\ncommands:")
	for _, cmd := range root.Commands() {
		if cmd.IsAvailableCommand() {
			fmt.Fprintf(w, "  %-10s %s\n", cmd.Name(), cmd.Short)
		}
	}
	fmt.Fprintln(w, "\nopsctl COMMAND --help shows a command's flags; opsctl --version the build;")
	fmt.Fprintln(w, "opsctl completion bash|zsh|fish|powershell prints a shell completion script.")
	fmt.Fprintln(w, "exit codes: 0 ok, 1 failed, 2 usage mistake, 3 a dependency is unreachable, 4 not found")
	fmt.Fprintln(w, "(reconcile has its own, those of reconciler once: opsctl reconcile --help)")
	fmt.Fprintln(w, `under --json a failure prints {"error":{"code":"...","message":"..."}} on stdout`)
}
