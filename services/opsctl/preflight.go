package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"surge/pkg/config"
	"surge/pkg/preflight"
)

func init() {
	commands["preflight"] = command{"check the deployment against the production checklist (preflight [--json] [--skip-host])",
		preflightUsage, runPreflight}
}

const preflightUsage = `opsctl preflight [--json] [--skip-host]
Check the deployment the SURGE_ variables name against the production checklist:
the Redis Cluster (as surge-ops or the administrator), this host, RabbitMQ's
queues, MySQL's schema and the gateway's admin token. Prints pass / warn / fail
per item with the fix; exits 1 when an item fails.
flags:
  --json        print the report as JSON
  --skip-host   skip the host items (when opsctl runs away from the Redis hosts)`

// adminTokenConfig is the gateway's admin token, as the gateway reads it,
// for the checklist.
type adminTokenConfig struct {
	AdminToken string `envconfig:"ADMIN_TOKEN" default:"surge-admin" secret:"true"`
}

// runPreflight checks Redis, the host, RabbitMQ, MySQL and the gateway's
// admin token as configured by the SURGE_ variables (run it with the
// gateway's), prints pass / warn / fail per item with the fix,
// and fails (exit 1) when any item fails. Run it as the surge-ops user
// (SURGE_REDIS_USER=surge-ops) or the administrator.
func runPreflight(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("preflight", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "print JSON")
	skipHost := fs.Bool("skip-host", false, "skip the host items (when opsctl runs away from the Redis hosts)")
	if err := fs.Parse(args); err != nil {
		return usagef("preflight: %v", err)
	}
	if fs.NArg() > 0 {
		return usagef("preflight: unexpected argument %q", fs.Arg(0))
	}
	var admin adminTokenConfig
	if err := config.Load(&admin); err != nil {
		return usagef("preflight: %v", err)
	}
	opts := preflight.Options{
		AdminToken: &admin.AdminToken,
		Redis: preflight.RedisOptions{Seeds: e.cfg.Redis.Addrs, Username: e.cfg.Redis.User, Password: e.cfg.Redis.Password,
			TLS: e.cfg.Redis.TLSConfig()},
		Rabbit:   preflight.RabbitOptions{URL: e.cfg.AMQP.URL, Topology: e.cfg.AMQP.Topology()},
		MySQLDSN: e.cfg.MySQL.DSN,
	}
	rep := preflight.Run(ctx, opts)
	if *skipHost {
		rep = withoutHost(rep)
	}
	if *asJSON {
		if err := e.printJSON(rep); err != nil {
			return err
		}
	} else {
		printPreflight(e.out, rep)
	}
	if failed := rep.Failed(); len(failed) > 0 {
		return fmt.Errorf("preflight: %d item(s) failed: %s", len(failed), strings.Join(failed, ", "))
	}
	return nil
}

func withoutHost(rep preflight.Report) preflight.Report {
	kept := rep.Results[:0:0]
	for _, r := range rep.Results {
		if !strings.HasPrefix(r.Item, "host.") {
			kept = append(kept, r)
		}
	}
	rep.Results = kept
	return rep
}

func printPreflight(w io.Writer, rep preflight.Report) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	counts := map[preflight.Status]int{}
	for _, r := range rep.Results {
		counts[r.Status]++
		fmt.Fprintf(tw, "%s\t%s\t%s\n", strings.ToUpper(string(r.Status)), r.Item, r.Detail)
		if r.Status != preflight.Pass && r.Fix != "" {
			fmt.Fprintf(tw, "\t\tfix: %s\n", r.Fix)
		}
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\n%d pass, %d warn, %d fail\n", counts[preflight.Pass], counts[preflight.Warn], counts[preflight.Fail])
}
