//go:build faults

package faults

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// firewall drops packets on the loopback from one program (by the uid it
// runs as: each gateway and worker has its own, through setpriv) to one
// engine port, with iptables rules in a chain of this test binary's own,
// so a blackhole cuts that program's link and nothing else on the
// machine. A nil firewall means the blackhole kinds cannot be dealt here.
type firewall struct {
	chain string

	mu    sync.Mutex
	rules map[string][]string // rule id -> its iptables match
}

// uidBase is the first uid the programs run as; program i of the run runs
// as uidBase + i (ids no account on a test machine uses).
const uidBase = 47100

// newFirewall creates the chain and jumps to it from OUTPUT, or says why
// it cannot (not root, iptables or setpriv missing).
func newFirewall() (*firewall, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("blackholes need root (iptables, and setpriv to run programs as their own uids)")
	}
	for _, bin := range []string{"iptables", "setpriv"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("%s is not installed (deploy/install-deps.sh installs it): %w", bin, err)
		}
	}
	f := &firewall{chain: fmt.Sprintf("SURGE-FAULTS-%d", os.Getpid()), rules: map[string][]string{}}
	if _, err := ipt("-N", f.chain); err != nil {
		return nil, err
	}
	if _, err := ipt("-I", "OUTPUT", "-o", "lo", "-j", f.chain); err != nil {
		_, _ = ipt("-X", f.chain)
		return nil, err
	}
	return f, nil
}

func ipt(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "iptables", append([]string{"-w", "5"}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// match is the rule dropping packets from uid to port, tagged with id.
func match(uid, port int, id string) []string {
	return []string{"-p", "tcp", "-d", "127.0.0.1", "--dport", strconv.Itoa(port), "-m", "owner",
		"--uid-owner", strconv.Itoa(uid), "-m", "comment", "--comment", id, "-j", "DROP"}
}

// drop starts dropping every packet uid sends to port; id names the rule.
func (f *firewall) drop(id string, uid, port int) error {
	m := match(uid, port, id)
	if _, err := ipt(append([]string{"-A", f.chain}, m...)...); err != nil {
		return err
	}
	f.mu.Lock()
	f.rules[id] = m
	f.mu.Unlock()
	return nil
}

// dropped is how many packets rule id dropped so far.
func (f *firewall) dropped(id string) (int, error) {
	out, err := ipt("-L", f.chain, "-v", "-n", "-x")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "/* "+id+" */") {
			fields := strings.Fields(l)
			if len(fields) > 0 {
				return strconv.Atoi(fields[0])
			}
		}
	}
	return 0, fmt.Errorf("no rule %s in %s", id, f.chain)
}

// heal removes rule id.
func (f *firewall) heal(id string) error {
	f.mu.Lock()
	m, ok := f.rules[id]
	delete(f.rules, id)
	f.mu.Unlock()
	if !ok {
		return nil
	}
	_, err := ipt(append([]string{"-D", f.chain}, m...)...)
	return err
}

// healAll removes every rule left.
func (f *firewall) healAll() error {
	f.mu.Lock()
	ids := make([]string, 0, len(f.rules))
	for id := range f.rules {
		ids = append(ids, id)
	}
	f.mu.Unlock()
	var errs []string
	for _, id := range ids {
		if err := f.heal(id); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// close removes the chain and the jump to it.
func (f *firewall) close() {
	_ = f.healAll()
	_, _ = ipt("-D", "OUTPUT", "-o", "lo", "-j", f.chain)
	_, _ = ipt("-F", f.chain)
	_, _ = ipt("-X", f.chain)
}
