package loadgen

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ProcStats is what a process used, from /proc/PID.
type ProcStats struct {
	PID int `json:"pid"`
	// PeakRSSMB is VmHWM: the most resident memory since the process
	// started. RSSMB is VmRSS now.
	PeakRSSMB float64 `json:"peak_rss_mb"`
	RSSMB     float64 `json:"rss_mb"`
	// CPUSeconds is the CPU time (user + system) the process spent during
	// the load; CPUPerRequestUS divides it by the requests completed.
	CPUSeconds      float64 `json:"cpu_s"`
	CPUPerRequestUS float64 `json:"cpu_us_per_request"`
}

// ReadProcMemory reads pid's VmHWM and VmRSS (Linux).
func ReadProcMemory(pid int) (ProcStats, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ProcStats{}, fmt.Errorf("read memory of pid %d: %w", pid, err)
	}
	defer f.Close()
	m := ProcStats{PID: pid}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "VmHWM" && name != "VmRSS") {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 64)
		if err != nil {
			return ProcStats{}, fmt.Errorf("parse %s of pid %d: %w", name, pid, err)
		}
		if name == "VmHWM" {
			m.PeakRSSMB = round3(kb / 1024)
		} else {
			m.RSSMB = round3(kb / 1024)
		}
	}
	if err := sc.Err(); err != nil {
		return ProcStats{}, fmt.Errorf("read memory of pid %d: %w", pid, err)
	}
	return m, nil
}

// clockTicks is USER_HZ, the unit of /proc CPU times: 100 on Linux
// whatever the kernel's own tick rate.
const clockTicks = 100

// ReadProcCPU returns the CPU time, user plus system, pid has used.
func ReadProcCPU(pid int) (float64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read cpu of pid %d: %w", pid, err)
	}
	// The command name (field 2) may hold spaces: count from its ')'.
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("read cpu of pid %d: short stat line", pid)
	}
	var ticks float64
	for _, f := range fields[11:13] { // utime and stime, fields 14 and 15
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return 0, fmt.Errorf("parse cpu of pid %d: %w", pid, err)
		}
		ticks += v
	}
	return ticks / clockTicks, nil
}

// MachineCPU is the machine's CPU time so far, from /proc/stat.
type MachineCPU struct{ Busy, Total float64 }

// ReadMachineCPU reads the machine's busy and total CPU time.
func ReadMachineCPU() (MachineCPU, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return MachineCPU{}, fmt.Errorf("read machine cpu: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return MachineCPU{}, fmt.Errorf("read machine cpu: empty /proc/stat")
	}
	fields := strings.Fields(sc.Text()) // cpu user nice system idle iowait irq softirq steal ...
	if len(fields) < 5 || fields[0] != "cpu" {
		return MachineCPU{}, fmt.Errorf("read machine cpu: unexpected line %q", sc.Text())
	}
	var m MachineCPU
	for i, f := range fields[1:] {
		if i >= 8 { // guest times are already counted in user
			break
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return MachineCPU{}, fmt.Errorf("parse machine cpu: %w", err)
		}
		m.Total += v / clockTicks
		if i != 3 && i != 4 { // idle, iowait
			m.Busy += v / clockTicks
		}
	}
	return m, nil
}
