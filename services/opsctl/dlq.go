package main

import (
	"context"
	"os/user"
	"time"

	"github.com/spf13/cobra"

	"surge/pkg/admin"
	"surge/pkg/config"
	"surge/pkg/ops"
	"surge/pkg/order"
	"surge/pkg/queue"
)

const dlqUsage = `opsctl dlq list [--json]
       opsctl dlq show ID [--json]
       opsctl dlq replay (ID... | --reason R | --since T | --all) [--dry-run] [--json]
       opsctl dlq discard ID... [--json]
       opsctl dlq discarded [--json]
       opsctl dlq restore ID... [--json]
flags:
  --json      print JSON
  --reason R  replay: the letters parked with this reason (malformed, unknown_sku,
              retries_exhausted, delivery_limit)
  --since T   replay: the letters that last failed since T, an RFC 3339 time or a
              duration back from now (90m)
  --all       replay: every dead letter
  --dry-run   replay: show what would be replayed, change nothing
A discarded letter is kept 30 days (dlq discarded) and can be parked again (dlq restore).
Replays, discards and restores are recorded with $SURGE_OPERATOR, or the OS user when it
is unset.`

// dlqActions are dlq's actions, for its usage mistakes.
const dlqActions = "list, show, replay, discard, discarded or restore"

func (c *cli) dlqCmd() *cobra.Command {
	dlq := withUsage(&cobra.Command{
		Use:   "dlq",
		Short: "list, show, replay, discard or restore dead letters (opsctl dlq --help)",
		RunE:  action(group("dlq", dlqActions)),
	}, dlqUsage)
	// sub declares one action; run gets the ids and --json.
	sub := func(use, short string, run func(ctx context.Context, ids []string, asJSON bool) error) *cobra.Command {
		return &cobra.Command{Use: use, Short: short,
			RunE: action(func(ctx context.Context, _ *cobra.Command, ids []string) error { return run(ctx, ids, c.json) })}
	}
	list := sub("list", "list the dead letters, oldest first", func(ctx context.Context, ids []string, asJSON bool) error {
		return c.dlqRead(ctx, "list", ids, asJSON)
	})
	show := sub("show ID", "show one dead letter", func(ctx context.Context, ids []string, asJSON bool) error {
		return c.dlqRead(ctx, "show", ids, asJSON)
	})
	var req admin.ReplayRequest
	var since string
	replay := sub("replay (ID... | --reason R | --since T | --all)", "republish dead letters",
		func(ctx context.Context, ids []string, asJSON bool) error {
			if since != "" {
				var err error
				if req.Since, err = admin.ParseSince(since, time.Now()); err != nil {
					return err
				}
			}
			req.IDs = ids
			return c.dlqReplay(ctx, req, asJSON)
		})
	replay.Flags().StringVar(&req.Reason, "reason", "", "replay the letters parked with this reason")
	replay.Flags().StringVar(&since, "since", "", "replay the letters that last failed since this time or duration")
	replay.Flags().BoolVar(&req.All, "all", false, "replay every dead letter")
	replay.Flags().BoolVar(&req.DryRun, "dry-run", false, "show what would be replayed, change nothing")
	_ = replay.RegisterFlagCompletionFunc("reason", cobra.FixedCompletions([]string{order.ReasonMalformed,
		order.ReasonUnknownSKU, queue.ReasonRetriesExhausted, "delivery_limit"}, cobra.ShellCompDirectiveNoFileComp))
	discard := sub("discard ID...", "discard dead letters (a copy is kept 30 days)", func(ctx context.Context, ids []string, asJSON bool) error {
		if len(ids) == 0 {
			return usagef("dlq discard: name the dead letters to discard (dlq list shows their ids)")
		}
		return c.dlqChange(ctx, asJSON, nil, func(svc *ops.DeadLetters, actor string) (admin.LetterReport, error) {
			return svc.Discard(ctx, ids, actor)
		})
	})
	discarded := sub("discarded", "list the kept copies of discarded letters", func(ctx context.Context, ids []string, asJSON bool) error {
		if len(ids) > 0 {
			return usagef("dlq discarded takes no arguments")
		}
		return c.dlqDiscarded(ctx, asJSON)
	})
	restore := sub("restore ID...", "park discarded letters again", func(ctx context.Context, ids []string, asJSON bool) error {
		if len(ids) == 0 {
			return usagef("dlq restore: name the discarded letters to restore (dlq discarded shows their ids)")
		}
		return c.dlqChange(ctx, asJSON, nil, func(svc *ops.DeadLetters, actor string) (admin.LetterReport, error) {
			return svc.Restore(ctx, ids, actor)
		})
	})
	dlq.AddCommand(list, show, replay, discard, discarded, restore)
	return dlq
}

func (c *cli) dlqRead(ctx context.Context, action string, ids []string, asJSON bool) error {
	switch {
	case action == "list" && len(ids) > 0:
		return usagef("dlq list takes no arguments")
	case action == "show" && len(ids) != 1:
		return usagef("dlq show: give exactly one dead letter id")
	}
	e, err := c.env()
	if err != nil {
		return err
	}
	svc, err := deadLetters(ctx, e)
	if err != nil {
		return err
	}
	if action == "show" {
		d, err := svc.Show(ctx, ids[0])
		if err != nil {
			return err
		}
		if asJSON {
			return e.printJSON(d)
		}
		printLetter(e.out, d)
		return nil
	}
	letters, err := svc.List(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		return e.printJSON(letters)
	}
	printLetters(e.out, letters)
	return nil
}

func (c *cli) dlqReplay(ctx context.Context, req admin.ReplayRequest, asJSON bool) error {
	check := func(actor string) error {
		req.Actor = actor
		return req.Validate()
	}
	return c.dlqChange(ctx, asJSON, check, func(svc *ops.DeadLetters, _ string) (admin.LetterReport, error) {
		return svc.Replay(ctx, req)
	})
}

// dlqDiscarded lists the kept copies of discarded letters.
func (c *cli) dlqDiscarded(ctx context.Context, asJSON bool) error {
	e, err := c.env()
	if err != nil {
		return err
	}
	svc, err := deadLetters(ctx, e)
	if err != nil {
		return err
	}
	kept, err := svc.Discarded(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		return e.printJSON(kept)
	}
	letters := make([]admin.Letter, len(kept))
	for i, k := range kept {
		letters[i] = k.Letter
	}
	printLetters(e.out, letters)
	return nil
}

// dlqChange makes one change to the dead letters in the operator's name
// and prints its report. check, when set, vets the request once the
// operator is known and before any engine is opened, so a bad request is
// refused as such even with the engines down.
func (c *cli) dlqChange(ctx context.Context, asJSON bool, check func(actor string) error,
	change func(svc *ops.DeadLetters, actor string) (admin.LetterReport, error)) error {
	actor, err := operator()
	if err != nil {
		return err
	}
	if check != nil {
		if err := check(actor); err != nil {
			return err
		}
	}
	e, err := c.env()
	if err != nil {
		return err
	}
	svc, err := deadLetters(ctx, e)
	if err != nil {
		return err
	}
	rep, err := change(svc, actor)
	return printReport(e, rep, err, asJSON)
}

// printReport prints a report that has results even when err is set (a
// broker lost midway): the operator sees what was done before the error.
func printReport(e *env, rep admin.LetterReport, err error, asJSON bool) error {
	if len(rep.Items) == 0 && err != nil {
		return err
	}
	if asJSON {
		return e.printJSONResult(rep, err)
	}
	printItems(e.out, rep)
	return err
}

// deadLetters opens RabbitMQ and MySQL; RabbitMQ first, so a broker that
// is down is named as the cause.
func deadLetters(ctx context.Context, e *env) (*ops.DeadLetters, error) {
	mq, err := e.AMQP(ctx)
	if err != nil {
		return nil, err
	}
	db, err := e.DB(ctx)
	if err != nil {
		return nil, err
	}
	return &ops.DeadLetters{Queue: ops.QueueDead{Conn: mq, Topology: e.cfg.AMQP.Topology()}, DB: db}, nil
}

// operatorConfig names who runs opsctl, for the audit log.
type operatorConfig struct {
	// Operator is SURGE_OPERATOR; empty means the OS user.
	Operator string `envconfig:"OPERATOR"`
}

func operator() (string, error) {
	var c operatorConfig
	if err := config.Load(&c); err != nil {
		return "", err
	}
	if c.Operator != "" {
		return c.Operator, nil
	}
	u, err := user.Current()
	if err != nil || u.Username == "" {
		return "", usagef("cannot tell who you are for the audit log: set SURGE_OPERATOR")
	}
	return u.Username, nil
}
