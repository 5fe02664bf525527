// Package testenv connects integration tests to the real engines: the
// local Redis Cluster, RabbitMQ and MariaDB. A test whose engine is down is
// skipped with a message saying how to start it, except when CI is set:
// then it fails, so a broken environment never passes as green.
package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // MySQL driver for database/sql.
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"
)

// Defaults match the services' (README, Configuration); each can be overridden by the same SURGE_
// variables the services read.
const (
	defaultRedisAddrs = "127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003,127.0.0.1:7004,127.0.0.1:7005"
	defaultRedisPass  = "surge"
	defaultAMQPURL    = "amqp://guest:guest@127.0.0.1:5672/"
	defaultMySQLRoot  = "root@tcp(127.0.0.1:3306)/"
)

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// unavailable skips locally and fails under CI.
func unavailable(t testing.TB, what string, err error, hint string) {
	t.Helper()
	msg := fmt.Sprintf("%s unreachable: %v (%s)", what, err, hint)
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// Unique returns prefix plus a random suffix, for per-test SKUs, queue
// names and databases.
func Unique(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// RedisAddrs returns the cluster seed addresses.
func RedisAddrs() []string { return strings.Split(env("SURGE_REDIS_ADDRS", defaultRedisAddrs), ",") }

// RedisPassword returns the cluster password.
func RedisPassword() string { return env("SURGE_REDIS_PASSWORD", defaultRedisPass) }

// Redis returns a client of the local Redis Cluster, closed at cleanup.
func Redis(t testing.TB) *redis.ClusterClient {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:    RedisAddrs(),
		Password: RedisPassword(),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		return n.Ping(ctx).Err()
	})
	if err == nil {
		var info string
		info, err = c.ClusterInfo(ctx).Result()
		if err == nil && !strings.Contains(info, "cluster_state:ok") {
			err = fmt.Errorf("cluster_state is not ok")
		}
	}
	if err != nil {
		_ = c.Close()
		unavailable(t, "Redis Cluster", err, "start it with deploy/redis-cluster.sh start")
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// AMQPURL returns the RabbitMQ URL after checking that it accepts a
// connection.
func AMQPURL(t testing.TB) string {
	t.Helper()
	url := env("SURGE_AMQP_URL", defaultAMQPURL)
	conn, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(3 * time.Second)})
	if err != nil {
		unavailable(t, "RabbitMQ", err, "start it with rabbitmq-server -detached")
		return ""
	}
	_ = conn.Close()
	return url
}

// MySQLDSN creates a fresh database for the calling test (dropped at
// cleanup) and returns a DSN for it, with parseTime and multiStatements.
func MySQLDSN(t testing.TB) string {
	t.Helper()
	root := env("SURGE_TEST_MYSQL_ROOT", defaultMySQLRoot)
	db, err := sql.Open("mysql", root)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err = db.PingContext(ctx)
		cancel()
	}
	if err != nil {
		unavailable(t, "MariaDB", err, "start it with start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd")
		return ""
	}
	name := Unique("surge_t_")
	if _, err := db.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		_, _ = db.Exec("DROP DATABASE IF EXISTS " + name)
		_ = db.Close()
	})
	return root + name + "?parseTime=true&multiStatements=true"
}

// CleanupSKU deletes every Redis key of sku at cleanup. The keys share
// the SKU's hash tag, so they are listed from its one slot on its master
// (CLUSTER GETKEYSINSLOT) rather than by a SCAN of every key of every
// master, which took seconds once benchmarks had filled the cluster.
func CleanupSKU(t testing.TB, c *redis.ClusterClient, sku string) {
	t.Helper()
	t.Cleanup(func() {
		ctx := context.Background()
		prefix := "{sku:" + sku + "}"
		n, err := c.MasterForKey(ctx, prefix)
		if err != nil {
			return
		}
		slot, err := c.ClusterKeySlot(ctx, prefix).Result()
		if err != nil {
			return
		}
		count, err := n.ClusterCountKeysInSlot(ctx, int(slot)).Result()
		if err != nil || count == 0 {
			return
		}
		ks, _ := n.ClusterGetKeysInSlot(ctx, int(slot), int(count)).Result()
		for _, k := range ks {
			if strings.HasPrefix(k, prefix+":") {
				n.Del(ctx, k)
			}
		}
	})
}
