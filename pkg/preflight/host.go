package preflight

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// HostFacts are the kernel settings Redis cares about, read on the machine
// the preflight runs on (run it on each Redis host).
type HostFacts struct {
	// Overcommit is /proc/sys/vm/overcommit_memory ("" when unreadable).
	Overcommit string
	// HugePages is /sys/kernel/mm/transparent_hugepage/enabled, such as
	// "always [madvise] never" ("" when unreadable).
	HugePages string
	// NoFile is the soft open-file limit of this process.
	NoFile uint64
}

// GatherHost reads this machine.
func GatherHost() HostFacts {
	var h HostFacts
	if b, err := os.ReadFile("/proc/sys/vm/overcommit_memory"); err == nil {
		h.Overcommit = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled"); err == nil {
		h.HugePages = strings.TrimSpace(string(b))
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil {
		h.NoFile = lim.Cur
	}
	return h
}

// redisMaxClients is Redis's default maxclients; it needs 32 more
// descriptors for itself.
const redisMaxClients = 10000

// CheckHost checks the host facts, and the nodes' maxclients (which Redis
// lowers at start when the open-file limit is too small). Host items only
// warn: the preflight may run on another machine than the nodes.
func CheckHost(h HostFacts, f RedisFacts) []Result {
	return []Result{checkOvercommit(h), checkHugePages(h), checkOpenFiles(h, f)}
}

func checkOvercommit(h HostFacts) Result {
	fix := "sysctl -w vm.overcommit_memory=1 and add vm.overcommit_memory = 1 to /etc/sysctl.conf"
	switch h.Overcommit {
	case "1":
		return Result{Item: ItemOvercommit, Status: Pass, Detail: "vm.overcommit_memory = 1"}
	case "":
		return Result{Item: ItemOvercommit, Status: Warn, Detail: "cannot read /proc/sys/vm/overcommit_memory", Fix: fix}
	}
	return Result{Item: ItemOvercommit, Status: Warn,
		Detail: "vm.overcommit_memory = " + h.Overcommit + ": a background save (fork) may fail under memory pressure", Fix: fix}
}

func checkHugePages(h HostFacts) Result {
	fix := "echo never > /sys/kernel/mm/transparent_hugepage/enabled (and at boot)"
	switch {
	case h.HugePages == "":
		return Result{Item: ItemHugePages, Status: Warn, Detail: "cannot read /sys/kernel/mm/transparent_hugepage/enabled", Fix: fix}
	case strings.Contains(h.HugePages, "[always]"):
		return Result{Item: ItemHugePages, Status: Warn,
			Detail: "transparent huge pages always on: latency spikes and memory bloat after fork", Fix: fix}
	}
	return Result{Item: ItemHugePages, Status: Pass, Detail: "transparent huge pages: " + h.HugePages}
}

func checkOpenFiles(h HostFacts, f RedisFacts) Result {
	var findings []string
	if h.NoFile < redisMaxClients+32 {
		findings = append(findings, fmt.Sprintf("open-file limit %d here, below %d (maxclients %d + 32)", h.NoFile, redisMaxClients+32, redisMaxClients))
	}
	for _, s := range f.Snapshots {
		if n, err := strconv.Atoi(s.Config["maxclients"]); err == nil && n < redisMaxClients {
			findings = append(findings, fmt.Sprintf("%s: maxclients %d (lowered to fit its open-file limit)", s.Addr, n))
		}
	}
	return verdict(ItemOpenFiles, Warn, findings, fmt.Sprintf("open-file limit %d; maxclients %d on every node", h.NoFile, redisMaxClients),
		"raise the limit (ulimit -n 65535, LimitNOFILE=65535 in the unit) and restart the nodes")
}
