// Package admin holds what operations staff ask for and are told: the
// requests and the reports of stock loads, dead-letter work and
// reconciliations, with the checks a request passes before anything is
// done. pkg/ops and pkg/reconcile do the work; opsctl, the admin API
// (pkg/httpapi) and the console speak these types to people. It imports
// no engine client, so the HTTP layer reaches none through it.
package admin

import (
	"strings"
	"time"

	"surge/pkg/order"
)

// ParseSince reads a --since value: an RFC 3339 time, or a duration
// counted back from now ("90m" means the last 90 minutes).
func ParseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return time.Time{}, order.Invalid("since %q: want an RFC 3339 time (2006-01-02T15:04:05Z) or a positive duration (90m)", s)
	}
	return now.Add(-d), nil
}

// ValidateActor checks who is acting, as recorded in the audit log.
func ValidateActor(actor string) error {
	if actor == "" {
		return order.Invalid("the operator's name is required (it is recorded with every replay)")
	}
	if len(actor) > 64 || strings.ContainsFunc(actor, func(r rune) bool { return r < ' ' || r > '~' }) {
		return order.Invalid("operator name must be 1-64 printable ASCII characters")
	}
	return nil
}
