//go:build faults

package faults

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one surge program run as a subprocess, restartable after a
// SIGKILL, its output appended to one log file across restarts.
type proc struct {
	name string
	bin  string
	args []string
	env  []string
	log  string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	runs int
}

// start runs the program unless it is running.
func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.alive() {
		return nil
	}
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	p.runs++
	fmt.Fprintf(f, "=== faults: start %s (run %d) at %s\n", p.name, p.runs, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env, cmd.Stdout, cmd.Stderr = p.env, f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(done) }()
	p.cmd, p.done = cmd, done
	return nil
}

// alive tells whether the last start is still running; p.mu is held.
func (p *proc) alive() bool {
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	p.signalAndWait(syscall.SIGKILL, time.Minute)
}

// stop asks the program to shut down (SIGTERM), then kills it after 15s.
func (p *proc) stop() {
	if !p.signalAndWait(syscall.SIGTERM, 15*time.Second) {
		p.kill()
	}
}

func (p *proc) signalAndWait(sig syscall.Signal, timeout time.Duration) bool {
	p.mu.Lock()
	if !p.alive() {
		p.mu.Unlock()
		return true
	}
	_ = p.cmd.Process.Signal(sig)
	done := p.done
	p.mu.Unlock()
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// tailFile returns the last n lines of a file, leaving out lines that
// contain any of skip.
func tailFile(path string, n int, skip ...string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	var keep []string
next:
	for _, line := range strings.Split(string(b), "\n") {
		for _, s := range skip {
			if strings.Contains(line, s) {
				continue next
			}
		}
		keep = append(keep, line)
	}
	return tailString(strings.Join(keep, "\n"), n)
}

func tailString(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// baseEnv is the test's environment without any SURGE_ variable, so the
// programs see only the settings given to them.
func baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SURGE_") {
			env = append(env, kv)
		}
	}
	return env
}
