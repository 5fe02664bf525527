package metrics

import "surge/pkg/version"

// setBuildInfo sets surge_build_info from the binary's build information
// (version.Get): the main module's version, the VCS revision go build
// stamped (a "-dirty" suffix when the tree had changes), the Go version;
// "unknown" where absent.
func setBuildInfo() {
	i := version.Get()
	buildInfo.WithLabelValues(i.Version, i.Revision, i.Go).Set(1)
}
