package admin

import (
	"encoding/json"
	"strings"
	"time"

	"surge/pkg/order"
)

// Letter is one parked message as operations see it.
type Letter struct {
	ID      string `json:"id"`
	OrderID string `json:"order_id"`
	// SKU is empty when the body is not an order.
	SKU      string `json:"sku"`
	Reason   string `json:"reason"`
	Attempts int    `json:"attempts"`
	// FirstFailure and LastFailure are absent when unknown (a message the
	// broker parked without surge's headers has no first failure).
	FirstFailure time.Time `json:"first_failure,omitzero"`
	LastFailure  time.Time `json:"last_failure,omitzero"`
	LastError    string    `json:"last_error"`
}

// LetterDetail is one letter with its headers and body.
type LetterDetail struct {
	Letter
	Headers map[string]any `json:"headers"`
	// Body is the body when it is JSON; BodyText holds any other body.
	Body     json.RawMessage `json:"body,omitempty"`
	BodyText string          `json:"body_text,omitempty"`
}

// Outcomes of a replay, discard or restore, per dead letter. The audit
// log (dlq_replays) records replayed, already_invoiced, already_rejected,
// discarded and restored.
const (
	// OutcomeReplayed: republished (confirmed) and removed from the dead
	// queue; the worker processes it again.
	OutcomeReplayed = "replayed"
	// OutcomeWouldReplay is OutcomeReplayed in a dry run.
	OutcomeWouldReplay = "would_replay"
	// OutcomeAlreadyInvoiced and OutcomeAlreadyRejected: MySQL already
	// holds the order's final outcome. The letter is not republished; it
	// is removed (in a dry run, it would be), since replaying it can change
	// nothing.
	OutcomeAlreadyInvoiced = "already_invoiced"
	OutcomeAlreadyRejected = "already_rejected"
	// OutcomeAlreadyReplayed: the letter left the queue by an earlier
	// replay and its order is not final yet; nothing was done.
	OutcomeAlreadyReplayed = "already_replayed"
	// OutcomeAlreadyDiscarded: the letter was discarded earlier; nothing
	// was done.
	OutcomeAlreadyDiscarded = "already_discarded"
	// OutcomeSkippedMalformed: selected by a filter, but its body is not
	// an order, so a replay could only park it again. It stays parked.
	OutcomeSkippedMalformed = "skipped_malformed"
	// OutcomeDiscarded: removed by a discard.
	OutcomeDiscarded = "discarded"
	// OutcomeRestored: a discarded letter parked again.
	OutcomeRestored = "restored"
	// OutcomeFailed: the action failed; the letter is still parked.
	OutcomeFailed = "failed"
)

// ReplayRequest selects dead letters to replay: either IDs, or a filter
// (Reason and/or Since), or All. Giving none, or IDs together with a
// filter, or All together with a filter, is refused.
type ReplayRequest struct {
	IDs []string `json:"ids,omitempty"`
	// Reason selects letters parked with this reason.
	Reason string `json:"reason,omitempty"`
	// Since selects letters whose last failure is at or after it.
	Since  time.Time `json:"since,omitzero"`
	All    bool      `json:"all,omitempty"`
	DryRun bool      `json:"dry_run,omitempty"`
	// Actor is who asks, recorded in the audit log.
	Actor string `json:"actor"`
}

// Validate checks the selection, the ids and the actor.
func (r ReplayRequest) Validate() error {
	filter := r.Reason != "" || !r.Since.IsZero()
	switch {
	case len(r.IDs) == 0 && !filter && !r.All:
		return order.Invalid("say what to replay: dead letter ids, --reason, --since or --all")
	case len(r.IDs) > 0 && (filter || r.All):
		return order.Invalid("give either dead letter ids or a selection (--reason, --since, --all), not both")
	case r.All && filter:
		return order.Invalid("--all selects every dead letter: drop it to select by --reason or --since")
	}
	if err := ValidateLetterIDs(r.IDs); err != nil {
		return err
	}
	return ValidateActor(r.Actor)
}

// Matches reports whether the filter (Reason, Since) selects l.
func (r ReplayRequest) Matches(l Letter) bool {
	if r.Reason != "" && l.Reason != r.Reason {
		return false
	}
	return r.Since.IsZero() || !l.LastFailure.Before(r.Since)
}

// ValidateLetterIDs checks dead-letter ids as given on a command line or
// in a request body.
func ValidateLetterIDs(ids []string) error {
	for _, id := range ids {
		if id == "" || len(id) > 64 || strings.ContainsFunc(id, func(r rune) bool { return r <= ' ' || r > '~' }) {
			return order.Invalid("dead letter id %q is malformed (ids are shown by dlq list)", id)
		}
	}
	return nil
}

// LetterItem is what happened to one dead letter.
type LetterItem struct {
	ID      string `json:"id"`
	OrderID string `json:"order_id"`
	SKU     string `json:"sku,omitempty"`
	Outcome string `json:"outcome"`
	Detail  string `json:"detail,omitempty"`
}

// LetterReport is the answer to a replay, discard or restore: one item
// per selected letter (parked ones in queue order, then named ones no
// longer parked) and how many ended with each outcome.
type LetterReport struct {
	Action string         `json:"action"`
	DryRun bool           `json:"dry_run"`
	Actor  string         `json:"actor"`
	Items  []LetterItem   `json:"results"`
	Counts map[string]int `json:"counts"`
}

// Add appends it and counts its outcome.
func (r *LetterReport) Add(it LetterItem) {
	if r.Counts == nil {
		r.Counts = map[string]int{}
	}
	r.Items = append(r.Items, it)
	r.Counts[it.Outcome]++
}
