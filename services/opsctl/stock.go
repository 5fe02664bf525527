package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"surge/pkg/admin"
	"surge/pkg/app"
	"surge/pkg/ops"
)

func init() {
	commands["stock"] = command{"load or show a SKU's stock (stock load SKU --stock N | stock show SKU)", stockUsage, runStock}
	commands["migrate"] = command{"apply the MySQL migrations", migrateUsage, func(ctx context.Context, e *env, args []string) error {
		if len(args) > 0 {
			return usagef("migrate takes no arguments\nusage: %s", migrateUsage)
		}
		return app.Migrate(ctx, e.cfg.MySQL.DSN, e.out)
	}}
}

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
Apply the MySQL migrations (sql/) to SURGE_MYSQL_DSN's database and exit.`

func runStock(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return usagef("stock: want load or show")
	}
	fs := flag.NewFlagSet("stock "+args[0], flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "print JSON")
	n := fs.Int("stock", -1, "total stock")
	name := fs.String("name", "", "product name")
	price := fs.Int64("price-cents", -1, "unit price in cents")
	limit := fs.Int("max-per-customer", 0, "purchase limit per customer (0: none)")
	sku, err := parseWithSKU(fs, args[1:])
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
	svc := &ops.Stock{DB: db, Redis: st}
	var rep admin.StockReport
	switch args[0] {
	case "load":
		if *n < 0 {
			return usagef("stock load: --stock N is required (N >= 0)")
		}
		req := admin.LoadRequest{Stock: n}
		if *name != "" {
			req.Name = name
		}
		if *price >= 0 {
			req.PriceCents = price
		}
		fs.Visit(func(f *flag.Flag) {
			if f.Name == "max-per-customer" {
				req.MaxPerCustomer = limit // validated by the load
			}
		})
		rep, err = svc.Load(ctx, sku, req)
	case "show":
		rep, err = svc.Show(ctx, sku)
	default:
		return usagef("stock: unknown action %q (want load or show)", args[0])
	}
	if err != nil {
		return err
	}
	if *asJSON {
		return e.printJSON(rep)
	}
	printStock(e.out, rep)
	return nil
}

// parseWithSKU accepts the SKU before or after the flags.
func parseWithSKU(fs *flag.FlagSet, args []string) (string, error) {
	var sku string
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		sku, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return "", usagef("%s: %v", fs.Name(), err)
	}
	if sku == "" && fs.NArg() > 0 {
		sku = fs.Arg(0)
	}
	if sku == "" {
		return "", usagef("%s: SKU is required", fs.Name())
	}
	return sku, nil
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
