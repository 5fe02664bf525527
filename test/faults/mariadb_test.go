//go:build faults

package faults

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql" // MySQL driver for database/sql.
)

// privateMariaDB is a mariadbd of this test binary's own: a fresh data
// directory, a free port, its own socket and pid file, run as root.
type privateMariaDB struct {
	dir  string
	port int
	cmd  *exec.Cmd
	done chan struct{}

	mu     sync.Mutex
	paused bool
}

func startMariaDB(root string) (*privateMariaDB, error) {
	for _, bin := range []string{"mariadb-install-db", "mariadbd"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("%s is not installed: %w", bin, err)
		}
	}
	dir := filepath.Join(root, "mariadb")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	install := exec.Command("mariadb-install-db", "--no-defaults", "--datadir="+filepath.Join(dir, "data"),
		"--user=root", "--auth-root-authentication-method=normal", "--skip-test-db")
	if out, err := install.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("mariadb-install-db: %w\n%s", err, tailString(string(out), 20))
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	m := &privateMariaDB{dir: dir, port: port, done: make(chan struct{})}
	m.cmd = exec.Command("mariadbd", "--no-defaults", "--datadir="+filepath.Join(dir, "data"),
		fmt.Sprintf("--port=%d", port), "--bind-address=127.0.0.1", "--socket="+filepath.Join(dir, "mysqld.sock"),
		"--pid-file="+filepath.Join(dir, "mysqld.pid"), "--user=root", "--skip-name-resolve",
		"--innodb-buffer-pool-size=64M", "--max-connections=500", "--log-error="+filepath.Join(dir, "error.log"))
	if err := m.cmd.Start(); err != nil {
		return nil, fmt.Errorf("mariadbd: %w", err)
	}
	go func() { _ = m.cmd.Wait(); close(m.done) }()
	if err := waitUntil(60*time.Second, 200*time.Millisecond, m.ping); err != nil {
		m.stop()
		return nil, fmt.Errorf("mariadbd on %d did not answer: %w\n%s", port, err,
			tailFile(filepath.Join(dir, "error.log"), 20))
	}
	return m, nil
}

// dsn is the DSN of database name (empty: none) as root.
func (m *privateMariaDB) dsn(name string) string {
	return fmt.Sprintf("root@tcp(127.0.0.1:%d)/%s", m.port, name)
}

func (m *privateMariaDB) ping() error {
	select {
	case <-m.done:
		return fmt.Errorf("mariadbd exited")
	default:
	}
	db, err := sql.Open("mysql", m.dsn("")+"?timeout=1s")
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return db.PingContext(ctx)
}

// pause freezes mariadbd (SIGSTOP): connections stay open, nothing answers.
func (m *privateMariaDB) pause() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	m.paused = true
	return nil
}

// resume lets a paused mariadbd go on (SIGCONT); harmless otherwise.
func (m *privateMariaDB) resume() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil && m.cmd.Process != nil {
		_ = m.cmd.Process.Signal(syscall.SIGCONT)
	}
	m.paused = false
}

func (m *privateMariaDB) stop() {
	if m.cmd == nil || m.cmd.Process == nil {
		return
	}
	m.resume()
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.done
	}
}
