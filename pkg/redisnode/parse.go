// Package redisnode reads the state of every node of a Redis Cluster, one
// node at a time: the topology from CLUSTER NODES, and each node's INFO,
// CLUSTER INFO and (when asked) CONFIG values. The cluster exporter and the
// production preflight both build on it; the parsers are pure functions so
// their checks can be tested on replies captured from real nodes.
package redisnode

import (
	"fmt"
	"strconv"
	"strings"
)

// Node is one line of CLUSTER NODES.
type Node struct {
	ID string
	// Addr is "host:port" (the cluster bus port and hostname dropped);
	// empty for a node the cluster knows no address of.
	Addr  string
	Flags []string
	// MasterID is the master a replica follows; "" for a master.
	MasterID string
	// Connected is the link state the answering node sees.
	Connected bool
	// Slots are the slot ranges a master serves ("0-5460").
	Slots []string
}

// Has reports whether the node carries flag ("master", "slave", "fail",
// "fail?", "myself", "noaddr", ...).
func (n Node) Has(flag string) bool {
	for _, f := range n.Flags {
		if f == flag {
			return true
		}
	}
	return false
}

// IsMaster reports whether the node is a master.
func (n Node) IsMaster() bool { return n.Has("master") }

// Failing reports whether the cluster flags the node as failed or
// suspected (fail, fail?), or has no address for it.
func (n Node) Failing() bool { return n.Has("fail") || n.Has("fail?") || n.Has("noaddr") }

// ParseClusterNodes parses a CLUSTER NODES reply.
func ParseClusterNodes(reply string) ([]Node, error) {
	var nodes []Node
	for _, line := range strings.Split(strings.TrimSpace(reply), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 8 {
			return nil, fmt.Errorf("parse CLUSTER NODES line %q: want at least 8 fields", line)
		}
		n := Node{ID: f[0], Flags: strings.Split(f[2], ","), Connected: f[7] == "connected", Slots: f[8:]}
		addr, _, _ := strings.Cut(f[1], "@")
		addr, _, _ = strings.Cut(addr, ",")
		if addr != ":0" && !strings.HasPrefix(addr, ":") {
			n.Addr = addr
		}
		if f[3] != "-" {
			n.MasterID = f[3]
		}
		nodes = append(nodes, n)
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("parse CLUSTER NODES: empty reply")
	}
	return nodes, nil
}

// ParseInfo parses an INFO or CLUSTER INFO reply into its fields.
func ParseInfo(reply string) map[string]string {
	fields := map[string]string{}
	for _, line := range strings.Split(reply, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = v
		}
	}
	return fields
}

// Replica is a replica as its master's INFO replication lists it.
type Replica struct {
	Addr  string
	State string // "online" once in sync
	// LagBytes is how far the replica's acknowledged offset is behind the
	// master's replication offset.
	LagBytes int64
	// LagSeconds is the time since the replica's last acknowledgement.
	LagSeconds int64
}

// Replicas lists the replicas in a master's INFO replication fields
// (slave0:ip=...,port=...,state=online,offset=N,lag=S).
func Replicas(info map[string]string) []Replica {
	masterOffset, _ := strconv.ParseInt(info["master_repl_offset"], 10, 64)
	var out []Replica
	for i := 0; ; i++ {
		raw, ok := info["slave"+strconv.Itoa(i)]
		if !ok {
			return out
		}
		kv := map[string]string{}
		for _, part := range strings.Split(raw, ",") {
			if k, v, ok := strings.Cut(part, "="); ok {
				kv[k] = v
			}
		}
		offset, _ := strconv.ParseInt(kv["offset"], 10, 64)
		lag, _ := strconv.ParseInt(kv["lag"], 10, 64)
		out = append(out, Replica{Addr: kv["ip"] + ":" + kv["port"], State: kv["state"],
			LagBytes: max(masterOffset-offset, 0), LagSeconds: lag})
	}
}

// Float reads a numeric field; ok is false when it is missing or not a
// number.
func Float(fields map[string]string, key string) (v float64, ok bool) {
	s, present := fields[key]
	if !present {
		return 0, false
	}
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil
}
