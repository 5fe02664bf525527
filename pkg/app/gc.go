package app

import (
	"os"
	"runtime/debug"
)

// The services' garbage collector defaults. A gateway or worker keeps a
// small live heap (a few MB) and allocates per request, so with Go's
// default GOGC=100 it collected every few hundred requests: in the
// benchmark's profiles the collector and the stack scans of hundreds of
// handler goroutines took 10-20% of the worker's CPU. GOGC=400 lets the
// heap grow to five times the live data between collections (peak RSS
// under the flash sale went from 55 to 77 MB for the gateway), and a soft
// limit of 512 MiB makes the collector work harder before memory could run
// away. GOGC and GOMEMLIMIT in the environment win, as the Go runtime
// documents.
const (
	defaultGCPercent   = 400
	defaultMemoryLimit = 512 << 20
)

// gcDefaults returns the settings to apply given the environment: a
// negative value means leave the runtime's own setting.
func gcDefaults(getenv func(string) string) (percent int, limit int64) {
	percent, limit = -1, -1
	if getenv("GOGC") == "" {
		percent = defaultGCPercent
	}
	if getenv("GOMEMLIMIT") == "" {
		limit = defaultMemoryLimit
	}
	return percent, limit
}

// tuneGC applies gcDefaults to this process.
func tuneGC() {
	percent, limit := gcDefaults(os.Getenv)
	if percent >= 0 {
		debug.SetGCPercent(percent)
	}
	if limit >= 0 {
		debug.SetMemoryLimit(limit)
	}
}
