package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/go-sql-driver/mysql"

	"surge/pkg/queue"
	"surge/pkg/store"
)

// reset drops the database named by SURGE_MYSQL_DSN and deletes the
// RabbitMQ topology named by SURGE_AMQP_*, so a benchmark starts and ends
// clean. It refuses the default names: those belong to `make up`.
func reset(ctx context.Context, cfg loadgenConfig, stdout io.Writer) error {
	topo := cfg.AMQP.Topology()
	dsn, err := mysql.ParseDSN(cfg.MySQL.DSN)
	if err != nil {
		return fmt.Errorf("reset: parse SURGE_MYSQL_DSN: %w", err)
	}
	name := dsn.DBName
	switch {
	case name == "" || name == "surge" || strings.Contains(name, "`"):
		return fmt.Errorf("reset: refusing to drop database %q; point SURGE_MYSQL_DSN at a benchmark database", name)
	case topo.Queue == queue.DefaultQueue || topo.Exchange == queue.DefaultExchange || topo.DeadQueue == queue.DefaultDeadQueue:
		return fmt.Errorf("reset: refusing to delete the default queues; set SURGE_AMQP_EXCHANGE, SURGE_AMQP_QUEUE and SURGE_AMQP_DEAD_QUEUE")
	}
	dsn.DBName = ""
	db, err := store.Open(ctx, dsn.FormatDSN(), store.Options{MaxOpenConns: 1})
	if err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	defer db.Close()
	if _, err := db.DB().ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
		return fmt.Errorf("reset: drop database %s: %w", name, err)
	}
	conn, err := queue.Dial(ctx, cfg.AMQP.URL, queue.DialOptions{Name: "surge-loadgen-reset"})
	if err != nil {
		return fmt.Errorf("reset: rabbitmq: %w", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("reset: open channel: %w", err)
	}
	defer ch.Close()
	if err := topo.Delete(ch); err != nil {
		return fmt.Errorf("reset: delete queues of %s: %w", topo.Exchange, err)
	}
	fmt.Fprintf(stdout, "dropped database %s, deleted exchange %s and queue %s with their retry and dead queues\n",
		name, topo.Exchange, topo.Queue)
	return nil
}
