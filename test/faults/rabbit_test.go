//go:build faults

package faults

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// privateRabbit is a RabbitMQ node of this test binary's own, started from
// the package's scripts with every path and port of its own (its Erlang
// cookie lives in its HOME). rabbitmqctl -n node drives its faults.
type privateRabbit struct {
	dir        string
	node       string
	port, dist int
	cmd        *exec.Cmd
	done       chan struct{}
}

// rabbitBin prefers the package's real scripts over /usr/sbin's wrappers,
// which switch to the rabbitmq user and its cookie.
func rabbitBin(name string) string {
	p := filepath.Join("/usr/lib/rabbitmq/bin", name)
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return name
}

// startRabbit starts the private node, up to three times: its ports are
// chosen free but may be taken before the node binds them (Erlang's
// dist_port_already_used), and a fresh pair then does.
func startRabbit(root string) (*privateRabbit, error) {
	if _, err := exec.LookPath(rabbitBin("rabbitmq-server")); err != nil {
		return nil, fmt.Errorf("rabbitmq-server is not installed: %w", err)
	}
	var err error
	for range 3 {
		var r *privateRabbit
		if r, err = startRabbitOnce(root); err == nil {
			return r, nil
		}
		_ = os.RemoveAll(filepath.Join(root, "rabbitmq"))
	}
	return nil, err
}

func startRabbitOnce(root string) (*privateRabbit, error) {
	r := &privateRabbit{dir: filepath.Join(root, "rabbitmq"), done: make(chan struct{})}
	var err error
	if r.port, err = freePort(); err != nil {
		return nil, err
	}
	if r.dist, err = freePort(); err != nil {
		return nil, err
	}
	r.node = fmt.Sprintf("surge-faults-%d@localhost", r.port)
	if err := r.writeConfig(); err != nil {
		return nil, err
	}
	out, err := os.Create(filepath.Join(r.dir, "server.out"))
	if err != nil {
		return nil, err
	}
	r.cmd = exec.Command(rabbitBin("rabbitmq-server"))
	r.cmd.Dir, r.cmd.Env, r.cmd.Stdout, r.cmd.Stderr = r.dir, r.env(), out, out
	if err := r.cmd.Start(); err != nil {
		out.Close()
		return nil, err
	}
	go func() { _ = r.cmd.Wait(); out.Close(); close(r.done) }()
	waited := make(chan error, 1)
	go func() {
		_, err := r.ctl(90*time.Second, "wait", filepath.Join(r.dir, "pid"), "--timeout", "80")
		waited <- err
	}()
	select {
	case err = <-waited:
	case <-r.done:
		err = errors.New("rabbitmq-server exited before it was up")
	}
	if err != nil {
		r.stop()
		return nil, fmt.Errorf("node %s did not start: %w\n%s", r.node, err,
			tailFile(filepath.Join(r.dir, "server.out"), 20))
	}
	return r, nil
}

func (r *privateRabbit) writeConfig() error {
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return err
	}
	files := map[string]string{
		"rabbitmq-env.conf": "NODENAME=" + r.node + "\n",
		"rabbitmq.conf":     fmt.Sprintf("listeners.tcp.local = 127.0.0.1:%d\n", r.port),
		"enabled_plugins":   "[].\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(r.dir, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (r *privateRabbit) env() []string {
	return append(os.Environ(), "HOME="+r.dir,
		"RABBITMQ_CONF_ENV_FILE="+filepath.Join(r.dir, "rabbitmq-env.conf"),
		"RABBITMQ_CONFIG_FILE="+filepath.Join(r.dir, "rabbitmq"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(r.dir, "enabled_plugins"),
		"RABBITMQ_NODENAME="+r.node, "RABBITMQ_NODE_PORT="+strconv.Itoa(r.port),
		"RABBITMQ_DIST_PORT="+strconv.Itoa(r.dist),
		"RABBITMQ_MNESIA_BASE="+filepath.Join(r.dir, "mnesia"),
		"RABBITMQ_LOG_BASE="+filepath.Join(r.dir, "log"),
		"RABBITMQ_PID_FILE="+filepath.Join(r.dir, "pid"),
		"ERL_EPMD_ADDRESS=127.0.0.1",
		"ERL_FLAGS=-kernel inet_dist_use_interface {127,0,0,1}")
}

// ctl runs rabbitmqctl against the private node.
func (r *privateRabbit) ctl(timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, rabbitBin("rabbitmqctl"), append([]string{"-n", r.node}, args...)...)
	cmd.Dir, cmd.Env = r.dir, r.env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("rabbitmqctl %s: %w: %s", strings.Join(args, " "), err, tailString(string(out), 5))
	}
	return string(out), nil
}

func (r *privateRabbit) url() string { return fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", r.port) }

// setAlarm makes the node raise its memory alarm: every publishing
// connection is blocked until clearAlarm.
func (r *privateRabbit) setAlarm() error {
	_, err := r.ctl(20*time.Second, "set_vm_memory_high_watermark", "0.0000001")
	return err
}

// clearAlarm restores the default watermark, retrying a few times.
func (r *privateRabbit) clearAlarm() error {
	return waitUntil(30*time.Second, time.Second, func() error {
		_, err := r.ctl(20*time.Second, "set_vm_memory_high_watermark", "0.4")
		return err
	})
}

// alarmed tells whether the node has raised its memory alarm (the
// effect of setAlarm), waiting a few seconds for it.
func (r *privateRabbit) alarmed() (string, error) {
	err := waitUntil(10*time.Second, 200*time.Millisecond, func() error {
		out, err := r.ctl(20*time.Second, "eval", "rabbit_alarm:get_alarms().")
		if err != nil {
			return err
		}
		if !strings.Contains(out, "memory") {
			return fmt.Errorf("no memory alarm raised: %s", strings.TrimSpace(out))
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return "memory alarm raised", nil
}

// closeConnections closes every client connection of the default vhost
// and says how many there were; none is an error (nothing was cut).
func (r *privateRabbit) closeConnections() (string, error) {
	out, err := r.ctl(20*time.Second, "list_connections", "-q", "--no-table-headers", "pid")
	if err != nil {
		return "", err
	}
	n := len(strings.Fields(out))
	if n == 0 {
		return "", fmt.Errorf("no client connection to close")
	}
	if _, err := r.ctl(20*time.Second, "close_all_connections", "surge fault test"); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d connections closed", n), nil
}

// depths returns, per queue, the messages ready and unacknowledged.
func (r *privateRabbit) depths() (map[string]int, error) {
	out, err := r.ctl(20*time.Second, "list_queues", "-q", "--no-table-headers", "name", "messages")
	if err != nil {
		return nil, err
	}
	d := map[string]int{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		if n, err := strconv.Atoi(f[1]); err == nil {
			d[f[0]] = n
		}
	}
	return d, nil
}

func (r *privateRabbit) stop() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	_, _ = r.ctl(30*time.Second, "stop")
	select {
	case <-r.done:
	case <-time.After(20 * time.Second):
		if b, err := os.ReadFile(filepath.Join(r.dir, "pid")); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		_ = r.cmd.Process.Kill()
		<-r.done
	}
}
