//go:build faults

package faults

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one surge program run as a subprocess, restartable after a
// SIGKILL, its output appended to one log file across restarts.
type proc struct {
	name    string
	program string // gateway, worker
	uid     int    // run as this uid (setpriv) when not 0, so iptables can cut its links alone
	bin     string
	args    []string
	env     []string
	log     string

	// onExit hears of every exit, asked (a signal the test sent) or not.
	onExit func(death)
	// up is the log message a run writes once it is up ("gateway
	// listening"). A run that exits with an error before writing it failed
	// to start (an engine it could not reach at start): as under the
	// fleet's supervisor, an init system or Kubernetes, it is started again
	// after a second, and the exit is recorded as a start failure.
	up string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	runs    int
	asked   bool  // the test signalled the running process to end
	from    int64 // the log's size when the last run started
	stopped bool  // stop was called: no supervisor restart
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
	if st, err := f.Stat(); err == nil {
		p.from = st.Size()
	}
	fmt.Fprintf(f, "=== faults: start %s (run %d) at %s\n", p.name, p.runs, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.bin, p.args...)
	if p.uid != 0 {
		id := strconv.Itoa(p.uid)
		cmd = exec.Command("setpriv", append([]string{"--reuid=" + id, "--regid=" + id, "--clear-groups", "--", p.bin}, p.args...)...)
	}
	cmd.Env, cmd.Stdout, cmd.Stderr = p.env, f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	go p.wait(cmd, f, done)
	p.cmd, p.done, p.asked = cmd, done, false
	return nil
}

// wait reaps the process and tells onExit whether its end was asked for.
func (p *proc) wait(cmd *exec.Cmd, f *os.File, done chan struct{}) {
	err := cmd.Wait()
	f.Close()
	p.mu.Lock()
	asked, from, stopped := p.asked, p.from, p.stopped
	p.mu.Unlock()
	exit := "exit 0"
	if err != nil {
		exit = err.Error()
	}
	d := death{Name: p.name, Asked: asked, Exit: exit}
	if !asked && err != nil && p.up != "" && !logHas(p.log, from, p.up) {
		d.AtStart, d.Exit = true, exit+": "+lastLine(p.log)
	}
	if p.onExit != nil {
		p.onExit(d)
	}
	close(done)
	if d.AtStart && !stopped {
		time.Sleep(time.Second)
		p.mu.Lock()
		stopped = p.stopped
		p.mu.Unlock()
		if !stopped {
			_ = p.start()
		}
	}
}

// logHas tells whether the log holds s past offset from.
func logHas(path string, from int64, s string) bool {
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) < from {
		return false
	}
	return strings.Contains(string(b[from:]), s)
}

// lastLine is the last line of the log.
func lastLine(path string) string {
	return tailFile(path, 1)
}

// running tells whether the last start is still running.
func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.alive()
}

// pid is the running process's pid, 0 when none runs.
func (p *proc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.alive() {
		return 0
	}
	return p.cmd.Process.Pid
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

// kill sends SIGKILL and waits for the process to be gone; it fails when
// no process ran or it did not end.
func (p *proc) kill() error {
	return p.end(syscall.SIGKILL, time.Minute)
}

// terminate sends SIGTERM and waits up to timeout for the program to shut
// down by itself.
func (p *proc) terminate(timeout time.Duration) error {
	return p.end(syscall.SIGTERM, timeout)
}

// stop asks the program to shut down (SIGTERM), then kills it after 15s;
// it is not started again.
func (p *proc) stop() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	if p.terminate(15*time.Second) != nil {
		_ = p.kill()
	}
}

// end signals the running process to end and waits for it.
func (p *proc) end(sig syscall.Signal, timeout time.Duration) error {
	p.mu.Lock()
	if !p.alive() {
		p.mu.Unlock()
		return fmt.Errorf("%s: no process running to send %s", p.name, sig)
	}
	p.asked = true
	err := p.cmd.Process.Signal(sig)
	done := p.done
	p.mu.Unlock()
	if err != nil {
		return fmt.Errorf("%s: %s: %w", p.name, sig, err)
	}
	select {
	case <-done:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("%s still running %s after %s", p.name, timeout, sig)
	}
}

// signal sends sig (SIGSTOP, SIGCONT) to the running process.
func (p *proc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.alive() {
		return fmt.Errorf("%s: no process running to send %s", p.name, sig)
	}
	return p.cmd.Process.Signal(sig)
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
