package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"os/user"
	"time"

	"surge/pkg/admin"
	"surge/pkg/config"
	"surge/pkg/ops"
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

func init() {
	commands["dlq"] = command{"list, show, replay, discard or restore dead letters (opsctl dlq --help)", dlqUsage, runDLQ}
}

func runDLQ(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return usagef("dlq: want list, show, replay, discard, discarded or restore\nusage: %s", dlqUsage)
	}
	action, args := args[0], args[1:]
	switch action {
	case "list", "show", "replay", "discard", "discarded", "restore":
	default:
		return usagef("dlq: unknown action %q (want list, show, replay, discard, discarded or restore)", action)
	}
	fs := flag.NewFlagSet("dlq "+action, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "print JSON")
	var req admin.ReplayRequest
	var since string
	if action == "replay" {
		fs.StringVar(&req.Reason, "reason", "", "replay the letters parked with this reason")
		fs.StringVar(&since, "since", "", "replay the letters that last failed since this time or duration")
		fs.BoolVar(&req.All, "all", false, "replay every dead letter")
		fs.BoolVar(&req.DryRun, "dry-run", false, "show what would be replayed, change nothing")
	}
	ids, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	switch action {
	case "list", "show":
		return dlqRead(ctx, e, action, ids, *asJSON)
	case "discarded":
		if len(ids) > 0 {
			return usagef("dlq discarded takes no arguments")
		}
		return dlqDiscarded(ctx, e, *asJSON)
	case "restore":
		if len(ids) == 0 {
			return usagef("dlq restore: name the discarded letters to restore (dlq discarded shows their ids)")
		}
		return dlqRestore(ctx, e, ids, *asJSON)
	case "replay":
		if since != "" {
			if req.Since, err = admin.ParseSince(since, time.Now()); err != nil {
				return err
			}
		}
		req.IDs = ids
		return dlqReplay(ctx, e, req, *asJSON)
	}
	if len(ids) == 0 {
		return usagef("dlq discard: name the dead letters to discard (dlq list shows their ids)")
	}
	return dlqDiscard(ctx, e, ids, *asJSON)
}

func dlqRead(ctx context.Context, e *env, action string, ids []string, asJSON bool) error {
	switch {
	case action == "list" && len(ids) > 0:
		return usagef("dlq list takes no arguments")
	case action == "show" && len(ids) != 1:
		return usagef("dlq show: give exactly one dead letter id")
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

func dlqReplay(ctx context.Context, e *env, req admin.ReplayRequest, asJSON bool) error {
	check := func(actor string) error {
		req.Actor = actor
		return req.Validate()
	}
	return dlqChange(ctx, e, asJSON, check, func(svc *ops.DeadLetters, _ string) (admin.LetterReport, error) {
		return svc.Replay(ctx, req)
	})
}

func dlqDiscard(ctx context.Context, e *env, ids []string, asJSON bool) error {
	return dlqChange(ctx, e, asJSON, nil, func(svc *ops.DeadLetters, actor string) (admin.LetterReport, error) {
		return svc.Discard(ctx, ids, actor)
	})
}

// dlqDiscarded lists the kept copies of discarded letters.
func dlqDiscarded(ctx context.Context, e *env, asJSON bool) error {
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

// dlqRestore parks discarded letters again.
func dlqRestore(ctx context.Context, e *env, ids []string, asJSON bool) error {
	return dlqChange(ctx, e, asJSON, nil, func(svc *ops.DeadLetters, actor string) (admin.LetterReport, error) {
		return svc.Restore(ctx, ids, actor)
	})
}

// dlqChange makes one change to the dead letters in the operator's name
// and prints its report. check, when set, vets the request once the
// operator is known and before any engine is opened, so a bad request is
// refused as such even with the engines down.
func dlqChange(ctx context.Context, e *env, asJSON bool, check func(actor string) error,
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
		if perr := e.printJSON(rep); perr != nil {
			return errors.Join(err, perr)
		}
		return err
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

// parseInterleaved parses flags placed before, between or after the
// positional arguments, and returns the positional ones.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, usagef("%s: %v\nusage: %s", fs.Name(), err, dlqUsage)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos, args = append(pos, args[0]), args[1:]
	}
}
