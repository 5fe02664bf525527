package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"surge/pkg/cluster"
	"surge/pkg/store"
	"surge/tools/ceiling"
)

// raw measures one engine's ceiling: loadgen raw redis|amqp|mysql|http.
func raw(ctx context.Context, cfg loadgenConfig, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("raw: want redis, amqp, mysql or http")
	}
	engine := args[0]
	fs := flag.NewFlagSet("loadgen raw "+engine, flag.ContinueOnError)
	d := fs.Duration("d", 3*time.Second, "measurement duration")
	workers := fs.Int("c", 0, "callers (redis, default 64), channels (amqp, default 8), connections (mysql, default 4), concurrency (http, default 256)")
	window := fs.Int("window", 0, "amqp: confirms in flight per channel (default 128)")
	batch := fs.Int("batch", 0, "mysql: rows per INSERT (default 500)")
	pipeline := fs.Int("pipeline", 0, "redis: EVALSHAs per round trip (default 1: none)")
	jsonOut := fs.String("json", "", "write the result as JSON to this file ('-': stdout)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	name := "ceiling-" + strings.ToLower(ulid.Make().String())
	var res ceiling.Result
	var err error
	switch engine {
	case "redis":
		rdb := cluster.New(cfg.Redis.Options())
		defer rdb.Close()
		res, err = ceiling.RedisEvalsha(ctx, rdb.ClusterClient, ceiling.RedisOptions{SKU: name, Workers: *workers, Duration: *d, Pipeline: *pipeline})
	case "amqp":
		res, err = ceiling.AMQPConfirmed(ctx, cfg.AMQP.URL, ceiling.AMQPOptions{
			Queue: "surge." + name, Channels: *workers, Window: *window, Duration: *d})
	case "mysql":
		db, oerr := store.Open(ctx, cfg.MySQL.DSN, store.Options{MaxOpenConns: max(*workers, 4)})
		if oerr != nil {
			return oerr
		}
		defer db.Close()
		res, err = ceiling.MySQLBatchInsert(ctx, db.DB().DB, ceiling.MySQLOptions{
			Table: strings.ReplaceAll(name, "-", "_"), Workers: *workers, Batch: *batch, Duration: *d})
	case "http":
		res, err = ceiling.HTTPEmpty(ctx, ceiling.HTTPOptions{Concurrency: *workers, Duration: *d})
	default:
		return fmt.Errorf("raw: unknown engine %q (want redis, amqp, mysql or http)", engine)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %.0f/s (%d in %.2fs; %s)\n", res.Name, res.PerSec, res.Ops, res.Seconds, res.Setup)
	return writeJSON(*jsonOut, res, stdout)
}
