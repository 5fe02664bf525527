package loadgen

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ProcMemory is a process's resident memory, from /proc/PID/status.
type ProcMemory struct {
	PID int `json:"pid"`
	// PeakRSSMB is VmHWM: the most resident memory since the process
	// started. RSSMB is VmRSS now.
	PeakRSSMB float64 `json:"peak_rss_mb"`
	RSSMB     float64 `json:"rss_mb"`
}

// ReadProcMemory reads pid's VmHWM and VmRSS (Linux).
func ReadProcMemory(pid int) (ProcMemory, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ProcMemory{}, fmt.Errorf("read memory of pid %d: %w", pid, err)
	}
	defer f.Close()
	m := ProcMemory{PID: pid}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "VmHWM" && name != "VmRSS") {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 64)
		if err != nil {
			return ProcMemory{}, fmt.Errorf("parse %s of pid %d: %w", name, pid, err)
		}
		if name == "VmHWM" {
			m.PeakRSSMB = round3(kb / 1024)
		} else {
			m.RSSMB = round3(kb / 1024)
		}
	}
	if err := sc.Err(); err != nil {
		return ProcMemory{}, fmt.Errorf("read memory of pid %d: %w", pid, err)
	}
	return m, nil
}
