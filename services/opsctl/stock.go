package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"surge/pkg/admin"
	"surge/pkg/app"
	"surge/pkg/ops"
	"surge/pkg/order"
)

const stockUsage = `opsctl stock load SKU --stock N [--name S] [--price-cents N] [--max-per-customer N] [--json]
       opsctl stock show SKU [--json]
load sets a SKU's stock in MySQL (creating the product when missing) and loads it
into Redis, both or neither; it is refused below what is sold plus what is
reserved right now (the message names both and the lowest stock allowed). show
prints the Redis and MySQL views side by side.
flags:
  --stock N         load: total stock, N >= 0 (required)
  --name S          load: product name
  --price-cents N   load: unit price in cents
  --max-per-customer N  load: purchase limit per customer (0: none; absent: keep)
  --json            print JSON`

const migrateUsage = `opsctl migrate
Apply the MySQL migrations (sql/) to SURGE_MYSQL_DSN's database and exit; --json prints
{"version":N,"latest":N}.
The other commands, and the services, refuse a schema older than their build.`

func (c *cli) migrateCmd() *cobra.Command {
	return withUsage(&cobra.Command{
		Use:   "migrate",
		Short: "apply the MySQL migrations",
		Args:  noArgs("migrate"),
		RunE: action(func(ctx context.Context, _ *cobra.Command, _ []string) error {
			e, err := c.env()
			if err != nil {
				return err
			}
			if !c.json {
				return app.Migrate(ctx, e.cfg.MySQL.DSN, e.out)
			}
			cur, latest, err := app.ApplyMigrations(ctx, e.cfg.MySQL.DSN)
			if err != nil {
				return err
			}
			return e.printJSON(map[string]int64{"version": cur, "latest": latest})
		}),
	}, migrateUsage)
}

// stockLoadFlags are stock load's flags, in one place: bind declares them
// on the command, request turns what was given into the load request.
type stockLoadFlags struct {
	stock      int
	name       string
	priceCents int64
	limit      int
}

func (f *stockLoadFlags) bind(fs *pflag.FlagSet) {
	fs.IntVar(&f.stock, "stock", 0, "total stock, N >= 0 (required)")
	fs.StringVar(&f.name, "name", "", "product name")
	fs.Int64Var(&f.priceCents, "price-cents", 0, "unit price in cents")
	fs.IntVar(&f.limit, "max-per-customer", 0, "purchase limit per customer (0: none; absent: keep)")
}

// request is the load request for the flags given on fs, checked as the
// admin API checks it, so that a bad one is refused before anything is
// dialled.
func (f *stockLoadFlags) request(fs *pflag.FlagSet) (admin.LoadRequest, error) {
	if !fs.Changed("stock") {
		return admin.LoadRequest{}, usagef("stock load: --stock N is required (N >= 0)")
	}
	req := admin.LoadRequest{Stock: &f.stock}
	if f.name != "" {
		req.Name = &f.name
	}
	if fs.Changed("price-cents") {
		req.PriceCents = &f.priceCents
	}
	if fs.Changed("max-per-customer") {
		req.MaxPerCustomer = &f.limit
	}
	return req, req.Validate()
}

func (c *cli) stockCmd() *cobra.Command {
	stock := withUsage(&cobra.Command{
		Use:   "stock",
		Short: "load or show a SKU's stock (stock load SKU --stock N | stock show SKU)",
		RunE:  action(group("stock", "load or show")),
	}, stockUsage)
	var lf stockLoadFlags
	load := &cobra.Command{
		Use:   "load SKU --stock N",
		Short: "set a SKU's stock in MySQL and Redis",
		Args:  oneSKU("stock load"),
		RunE: action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			req, err := lf.request(cmd.Flags())
			if err != nil {
				return err
			}
			who, err := operator()
			if err != nil {
				return err
			}
			ctx = admin.WithLoadedBy(ctx, admin.LoadedBy{Actor: who, Via: admin.ViaOpsctl})
			return c.stock(ctx, c.json, func(svc *ops.Stock) (admin.StockReport, error) {
				return svc.Load(ctx, args[0], req)
			})
		}),
	}
	lf.bind(load.Flags())
	show := &cobra.Command{
		Use:   "show SKU",
		Short: "show a SKU's stock in Redis and MySQL side by side",
		Args:  oneSKU("stock show"),
		RunE: action(func(ctx context.Context, _ *cobra.Command, args []string) error {
			return c.stock(ctx, c.json, func(svc *ops.Stock) (admin.StockReport, error) {
				return svc.Show(ctx, args[0])
			})
		}),
	}
	stock.AddCommand(load, show)
	return stock
}

// stock opens MySQL and Redis, runs do and prints its report.
func (c *cli) stock(ctx context.Context, asJSON bool, do func(*ops.Stock) (admin.StockReport, error)) error {
	e, err := c.env()
	if err != nil {
		return err
	}
	db, err := e.DB(ctx)
	if err != nil {
		return err
	}
	st, err := e.Stock(ctx)
	if err != nil {
		return err
	}
	rep, err := do(&ops.Stock{DB: db, Redis: st})
	if err != nil {
		return err
	}
	if asJSON {
		return e.printJSON(rep)
	}
	printStock(e.out, rep)
	return nil
}

// oneSKU accepts exactly one argument, a valid SKU.
func oneSKU(name string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		switch {
		case len(args) == 0:
			return usagef("%s: SKU is required", name)
		case len(args) > 1:
			return usagef("%s: one SKU, got %d arguments", name, len(args))
		}
		if err := order.ValidateSKU(args[0]); err != nil {
			return usagef("%s: %v", name, err)
		}
		return nil
	}
}

// noArgs refuses any argument.
func noArgs(name string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usagef("%s takes no arguments, got %q", name, args[0])
		}
		return nil
	}
}

// group is the work of a command that only holds actions (stock, dlq):
// called without one, or with one it does not know, it is a usage mistake
// that suggests the closest action.
func group(name, want string) func(ctx context.Context, cmd *cobra.Command, args []string) error {
	return func(_ context.Context, cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return usagef("%s: want %s", name, want)
		}
		msg := fmt.Sprintf("%s: unknown action %q (want %s)", name, args[0], want)
		if cmd.SuggestionsMinimumDistance <= 0 {
			cmd.SuggestionsMinimumDistance = 2 // cobra's default, set only on the root
		}
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += fmt.Sprintf("; did you mean %q?", s[0])
		}
		return usageError{msg}
	}
}

func printStock(w io.Writer, r admin.StockReport) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "SKU\t%s\n", r.SKU)
	fmt.Fprintf(tw, "\tSTOCK\tAVAIL\tRESERVED\tSOLD\n")
	if r.MySQL != nil {
		fmt.Fprintf(tw, "mysql\t%d\t%d\t-\t%d\n", r.MySQL.Stock, r.MySQL.Stock-r.MySQL.Sold, r.MySQL.Sold)
	} else {
		fmt.Fprintf(tw, "mysql\t(no product)\n")
	}
	if r.Redis.Loaded {
		fmt.Fprintf(tw, "redis\t%d\t%d\t%d\t%d\n", r.Redis.Stock, r.Redis.Avail, r.Redis.Reserved, r.Redis.Sold)
	} else {
		fmt.Fprintf(tw, "redis\t(not loaded)\n")
	}
	if r.MySQL != nil && r.MySQL.MaxPerCustomer > 0 || r.Redis.MaxPerCustomer > 0 {
		fmt.Fprintf(tw, "max per customer\tmysql %d\tredis %d\n", mysqlLimit(r), r.Redis.MaxPerCustomer)
	}
	fmt.Fprintf(tw, "consistent\t%v\n", r.Consistent)
	_ = tw.Flush()
}

func mysqlLimit(r admin.StockReport) int {
	if r.MySQL == nil {
		return 0
	}
	return r.MySQL.MaxPerCustomer
}
