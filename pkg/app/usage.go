package app

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"surge/pkg/config"
)

// Usage is what a service's --help prints, and what its command line may
// hold.
type Usage struct {
	// Synopsis is the text after "usage:": the commands, one a line,
	// --version and --help included.
	Synopsis string
	// Details follow the commands: flags, exit codes.
	Details string
	// Commands are the words the first argument may be (none: serve);
	// the value says whether more arguments may follow (reconciler
	// once's flags).
	Commands map[string]bool
	// Config is a pointer to the configuration the program loads
	// (config.Load): --help lists its SURGE_ variables.
	Config any
}

// Exit codes of a service's command line, besides what run returns.
const (
	exitOK    = 0
	exitUsage = 2
)

// parseArgs answers --help (-h, help) with the usage on stdout and a
// command line the program cannot take with a usage error on stderr, both
// before any configuration is read. It returns the exit code and false
// when the program must not run.
func (u Usage) parseArgs(name string, args []string, stdout, stderr io.Writer) (int, bool) {
	if wantsHelp(args) {
		if err := u.Print(stdout); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			return 1, false
		}
		return exitOK, false
	}
	if len(args) == 0 {
		return exitOK, true
	}
	more, ok := u.Commands[args[0]]
	switch {
	case !ok:
		fmt.Fprintf(stderr, "%s: unknown command %q (want %s); %s --help shows the usage\n",
			name, args[0], u.commandList(), name)
	case len(args) > 1 && !more:
		fmt.Fprintf(stderr, "%s %s: unexpected argument %q; %s --help shows the usage\n", name, args[0], args[1], name)
	default:
		return exitOK, true
	}
	return exitUsage, false
}

// wantsHelp: help, -h, -help or --help first, or -h / --help among the
// flags (before "--").
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

func (u Usage) commandList() string {
	names := make([]string, 0, len(u.Commands))
	for n := range u.Commands {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, " or ")
}

// Print writes the usage: the synopsis, then every SURGE_ variable the
// program reads with its default (a secret's is not shown).
func (u Usage) Print(w io.Writer) error {
	vars, err := config.Vars(u.Config)
	if err != nil {
		return err
	}
	pprof, err := config.Vars(&profileConfig{})
	if err != nil {
		return err
	}
	vars = append(vars, pprof...)
	fmt.Fprintf(w, "usage:\n%s%s\n", u.Synopsis, u.Details)
	fmt.Fprintf(w, "settings (environment; a secret may instead be read from the file SURGE_<NAME>_FILE names):\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, v := range vars {
		def := v.Default
		switch {
		case v.Secret:
			def = "secret, or " + v.Name + config.FileSuffix
		case def == "":
			def = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s\n", v.Name, def)
	}
	return tw.Flush()
}
