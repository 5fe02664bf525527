//go:build faults

package faults

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// engines are the private Redis Cluster, MariaDB and RabbitMQ node of
// this test binary: faults never touch the shared ones.
type engines struct {
	dir   string
	redis *privateCluster
	db    *privateMariaDB
	mq    *privateRabbit
	fw    *firewall // nil when blackholes cannot be dealt here (firewallErr says why)
}

// firewallErr is why no firewall could be set up.
var firewallErr error

// quietRedis drops go-redis's own log lines (one per failed dial while a
// node is dead).
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// startEngines starts the three engines in a fresh directory; they are
// stopped and the directory removed at cleanup, also when the test fails.
func startEngines(t *testing.T, keep bool) *engines {
	t.Helper()
	redis.SetLogger(quietRedis{})
	dir, err := os.MkdirTemp("", "surge-faults-")
	if err != nil {
		t.Fatal(err)
	}
	e := &engines{dir: dir}
	t.Cleanup(func() { e.stop(t, keep) })
	if e.fw, firewallErr = newFirewall(); firewallErr == nil {
		if err := os.Chmod(bins, 0o755); err != nil { // the programs run as their own uids
			t.Fatal(err)
		}
	}
	start := time.Now()
	errc := make(chan error, 3)
	go func() { c, err := startPrivateCluster(dir); e.redis = c; errc <- wrap("redis cluster", err) }()
	go func() { db, err := startMariaDB(dir); e.db = db; errc <- wrap("mariadb", err) }()
	go func() { mq, err := startRabbit(dir); e.mq = mq; errc <- wrap("rabbitmq", err) }()
	var errs []string
	for range 3 {
		if err := <-errc; err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		t.Fatalf("private engines: %s", strings.Join(errs, "; "))
	}
	t.Logf("private engines up in %.1fs under %s: redis cluster 127.0.0.1:%d-%d, mariadb :%d, rabbitmq %s :%d",
		time.Since(start).Seconds(), dir, e.redis.Base, e.redis.Base+5, e.db.port, e.mq.node, e.mq.port)
	return e
}

func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

func (e *engines) stop(t *testing.T, keep bool) {
	if e.fw != nil {
		e.fw.close()
	}
	if e.mq != nil {
		e.mq.stop()
	}
	if e.db != nil {
		e.db.stop()
	}
	if e.redis != nil {
		e.redis.Stop()
	}
	if keep {
		t.Logf("kept %s (SURGE_FAULTS_KEEP)", e.dir)
		return
	}
	_ = os.RemoveAll(e.dir)
}

// heal undoes whatever a fault may have left: paused processes resumed,
// dead Redis nodes restarted, the broker's memory watermark restored.
func (e *engines) heal() error {
	e.db.resume()
	var errs []string
	if e.fw != nil {
		if err := e.fw.healAll(); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if err := e.mq.clearAlarm(); err != nil {
		errs = append(errs, err.Error())
	}
	if err := e.redis.Heal(); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return fmt.Errorf("heal: %s", strings.Join(errs, "; "))
	}
	return nil
}

// freePort returns a TCP port nothing listens on right now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// waitUntil polls cond every step until it holds or timeout passes.
func waitUntil(timeout, step time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s: %w", timeout, err)
		}
		time.Sleep(step)
	}
}
