package metrics

import (
	"runtime"
	"runtime/debug"
)

// setBuildInfo sets surge_build_info from the binary's build information:
// the main module's version and the VCS revision go build stamped (a
// "-dirty" suffix when the tree had changes), "unknown" where absent.
func setBuildInfo() {
	version, revision := "unknown", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		dirty := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if dirty && revision != "unknown" {
			revision += "-dirty"
		}
	}
	buildInfo.WithLabelValues(version, revision, runtime.Version()).Set(1)
}
