// Package version says which build of surge is running, from the build
// information the Go toolchain stamps into every binary: the main
// module's version, the VCS revision and the Go version. The programs'
// --version and the surge_build_info metric both read it here.
package version

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// Info identifies a build. A field the binary does not carry (built
// outside a checkout, or by `go run`) is "unknown".
type Info struct {
	// Version is the main module's version: a tag, or a pseudo-version
	// made from the commit when the tree is not tagged.
	Version string
	// Revision is the VCS commit, with "-dirty" when the tree had
	// uncommitted changes.
	Revision string
	// Go is the toolchain that built the binary.
	Go string
}

// Get reads this binary's build information.
func Get() Info {
	i := Info{Version: "unknown", Revision: "unknown", Go: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return i
	}
	if bi.Main.Version != "" {
		i.Version = bi.Main.Version
	}
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			i.Revision = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && i.Revision != "unknown" {
		i.Revision += "-dirty"
	}
	return i
}

// IsFlag reports whether a program's first argument asks for its version.
func IsFlag(args []string) bool {
	return len(args) > 0 && (args[0] == "--version" || args[0] == "-version")
}

// Print writes one line naming the program and the build:
// "gateway version v0.0.0-… revision 1a2b… go1.26.8".
func Print(w io.Writer, program string) error {
	i := Get()
	_, err := fmt.Fprintf(w, "%s version %s revision %s %s\n", program, i.Version, i.Revision, i.Go)
	return err
}
