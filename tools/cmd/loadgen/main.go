// Command loadgen measures surge: it drives HTTP load at the gateway and
// checks the books afterwards, serves the naive SQL baseline and the
// sold-out floor, measures the engines' raw ceilings, and turns a
// benchmark's parts into one report.
//
//	loadgen run -sku S [-stock N] (-n N | -d D) [-c C] [-rate R] [-check] ...
//	loadgen naive-server [-addr A]        one MySQL transaction per order
//	loadgen floor-server [-addr A]        the sold-out answer with no engine
//	loadgen raw redis|amqp|mysql|http     the engines' (and HTTP's) raw ceilings
//	loadgen report -dir var/bench         results.json, the table, the plots
//	loadgen reset                         drop the benchmark's database and queues
//
// Engines are located by the SURGE_ variables the services read (README);
// deploy/bench.sh (make bench) runs the whole benchmark.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"surge/pkg/config"
	"surge/pkg/version"
)

const usage = `usage: loadgen COMMAND [FLAGS]   (loadgen COMMAND -h lists a command's flags)

  run -sku S [-stock N] (-n N | -d D) [-c C] [-rate R] [-check]   load the gateway
  naive-server [-addr A]        the naive baseline: one MySQL transaction per order
  floor-server [-addr A]        the sold-out floor: the gateway's decoding and 409, no engine
  raw redis|amqp|mysql|http     the engines' (and HTTP's) raw ceilings
  report -dir var/bench         results.json, the table and the plots
  reset                         drop the benchmark's database and queues

loadgen --version prints the version, VCS revision and Go version.
make bench runs the whole benchmark (deploy/bench.sh).
`

// loadgenConfig is what loadgen reads from SURGE_ variables.
type loadgenConfig struct {
	config.Common
	// HTTPAddr is the gateway loaded by default: SURGE_HTTP_ADDR.
	HTTPAddr string `envconfig:"HTTP_ADDR" default:"127.0.0.1:8080"`
	// AdminAddr is its admin listener, where stock is loaded:
	// SURGE_ADMIN_ADDR.
	AdminAddr string `envconfig:"ADMIN_ADDR" default:"127.0.0.1:8081"`
	// AdminToken authorises the stock loads: SURGE_ADMIN_TOKEN (or the
	// file SURGE_ADMIN_TOKEN_FILE).
	AdminToken string `envconfig:"ADMIN_TOKEN" default:"surge-admin" secret:"true"`
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if version.IsFlag(args) {
		return version.Print(stdout, "loadgen")
	}
	var cfg loadgenConfig
	if err := config.Load(&cfg); err != nil {
		return err
	}
	if len(args) == 0 {
		return fmt.Errorf("want a command: run, naive-server, floor-server, raw, report or reset")
	}
	switch args[0] {
	case "help", "-h", "--help":
		_, err := io.WriteString(stdout, usage)
		return err
	case "run":
		return runLoad(ctx, cfg, args[1:], stdout, stderr)
	case "naive-server":
		return naiveServer(ctx, cfg, args[1:], stderr)
	case "floor-server":
		return floorServer(ctx, args[1:], stderr)
	case "raw":
		return raw(ctx, cfg, args[1:], stdout)
	case "report":
		return report(args[1:], stdout)
	case "reset":
		return reset(ctx, cfg, stdout)
	}
	return fmt.Errorf("unknown command %q (want run, naive-server, floor-server, raw, report or reset)", args[0])
}
