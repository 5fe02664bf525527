package benchreport

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Machine describes where a run happened.
type Machine struct {
	CPUs      int      `json:"cpus"`
	CPUModel  string   `json:"cpu_model"`
	MemoryMB  int64    `json:"memory_mb"`
	Kernel    string   `json:"kernel"`
	GoVersion string   `json:"go_version"`
	At        string   `json:"at"`
	Versions  []string `json:"versions,omitempty"`
	// LoadAvg is /proc/loadavg when the report was written: the run's
	// own load plus whatever else this machine was doing.
	LoadAvg string `json:"load_avg,omitempty"`
	// LoadBefore is the load average before the run started.
	LoadBefore string `json:"load_avg_before,omitempty"`
}

// ReadMachine describes this machine (Linux /proc; blanks elsewhere).
func ReadMachine(now time.Time) Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), At: now.UTC().Format(time.RFC3339)}
	if raw, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		m.CPUModel = field(string(raw), "model name")
	}
	if raw, err := os.ReadFile("/proc/meminfo"); err == nil {
		kb, _ := strconv.ParseInt(strings.TrimSuffix(field(string(raw), "MemTotal"), " kB"), 10, 64)
		m.MemoryMB = kb / 1024
	}
	if raw, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.LoadAvg = loadAvg(string(raw))
	}
	if raw, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(raw))
	}
	return m
}

// field returns the value of the first "name: value" line.
func field(text, name string) string {
	for _, line := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(k) == name {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func nonEmptyLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// loadAvg keeps the three averages of a /proc/loadavg line.
func loadAvg(line string) string {
	f := strings.Fields(line)
	return strings.Join(f[:min(3, len(f))], " ")
}
