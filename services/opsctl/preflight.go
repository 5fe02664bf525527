package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"surge/pkg/config"
	"surge/pkg/preflight"
)

func (c *cli) preflightCmd() *cobra.Command {
	var skipHost bool
	cmd := &cobra.Command{
		Use:   "preflight [--json] [--skip-host]",
		Short: "check the deployment against the production checklist (preflight [--json] [--skip-host])",
		Args:  noArgs("preflight"),
		RunE: action(func(ctx context.Context, _ *cobra.Command, _ []string) error {
			return c.preflight(ctx, c.json, skipHost)
		}),
	}
	cmd.Flags().BoolVar(&skipHost, "skip-host", false, "skip the host items (when opsctl runs away from the Redis hosts)")
	return withUsage(cmd, preflightUsage)
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

// preflight checks Redis, the host, RabbitMQ, MySQL and the gateway's
// admin token as configured by the SURGE_ variables (run it with the
// gateway's), prints pass / warn / fail per item with the fix,
// and fails (exit 1) when any item fails. Run it as the surge-ops user
// (SURGE_REDIS_USER=surge-ops) or the administrator.
func (c *cli) preflight(ctx context.Context, asJSON, skipHost bool) error {
	e, err := c.env()
	if err != nil {
		return err
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
	if skipHost {
		rep = withoutHost(rep)
	}
	var failure error
	if failed := rep.Failed(); len(failed) > 0 {
		failure = fmt.Errorf("preflight: %d item(s) failed: %s", len(failed), strings.Join(failed, ", "))
	}
	if asJSON {
		return e.printJSONResult(rep, failure)
	}
	printPreflight(e.out, rep)
	return failure
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
