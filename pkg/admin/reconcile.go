package admin

import (
	"time"

	"surge/pkg/order"
)

// ReconcileRequest names the SKUs to reconcile, none meaning every
// product, and whether to only report what would be repaired.
type ReconcileRequest struct {
	SKUs   []string `json:"skus"`
	DryRun bool     `json:"dry_run"`
	// Actor is who asks, recorded with each repair ("" is the schedule).
	Actor string `json:"-"`
}

// Validate checks every SKU's syntax.
func (r ReconcileRequest) Validate() error {
	for _, sku := range r.SKUs {
		if err := order.ValidateSKU(sku); err != nil {
			return err
		}
	}
	return nil
}

// SKUOutcome says how reconciling one SKU ended.
type SKUOutcome string

// The outcomes, from the calmest to the most alarming for an operator.
const (
	// SKUConsistent: Redis agreed with MySQL, nothing was changed.
	SKUConsistent SKUOutcome = "consistent"
	// SKURepaired: repairs were applied (in a dry run: they are needed),
	// and Redis now agrees with MySQL.
	SKURepaired SKUOutcome = "repaired"
	// SKUBusy: another run held the SKU's lock, or live commits moved sold
	// during every attempt so it could not be verified. Nothing is wrong;
	// the next run finishes the job.
	SKUBusy SKUOutcome = "busy"
	// SKUFailed: an engine failed, or the SKU is unknown to MySQL.
	SKUFailed SKUOutcome = "failed"
)

// Counters are a SKU's stock keys in Redis. Loaded is false when the SKU
// had no stock key (never loaded, or lost).
type Counters struct {
	Loaded   bool `json:"loaded"`
	Stock    int  `json:"stock"`
	Avail    int  `json:"avail"`
	Sold     int  `json:"sold"`
	Reserved int  `json:"reserved"`
}

// Found is what the reconciler read before repairing a SKU.
type Found struct {
	MySQLStock int      `json:"mysql_stock"`
	MySQLSold  int      `json:"mysql_sold"`
	Redis      Counters `json:"redis"`
	// Reservations is the number of open reservations in Redis.
	Reservations int `json:"reservations"`
	// Compensated counts the accepted orders MySQL rejected within the
	// lookback window (reason sold_out_after_acceptance).
	Compensated int `json:"compensated,omitempty"`
	// Orders says why each order acted upon was chosen: "invoiced"
	// (a reservation, or a commit Redis lost, of an order MySQL invoiced),
	// "rejected", or "no_order" (no MySQL order after the grace period:
	// published again).
	Orders map[string]string `json:"orders,omitempty"`
}

// Changes is what one repair changed in Redis (or would, in a dry run).
type Changes struct {
	// Committed are orders MySQL invoiced whose units were moved to sold.
	Committed []string `json:"committed,omitempty"`
	// Released are reservations whose units went back to avail.
	Released []string `json:"released,omitempty"`
	// Republished are orders with no MySQL order after the grace period,
	// published again so a worker settles them; their units stay reserved.
	Republished []string `json:"republished,omitempty"`
	// Unpublished are such orders whose publish failed: tried again after
	// another grace period.
	Unpublished []string `json:"unpublished,omitempty"`
	// Held are such orders published the most times allowed: reserved
	// until an operator replays or discards their dead letter.
	Held []string `json:"held,omitempty"`
	// MaxPerCustomer is set when the SKU's purchase limit in Redis was set
	// to MySQL's (a failover lost a load).
	MaxPerCustomer *LimitChange `json:"max_per_customer,omitempty"`
	// CustomerCounts are the per-customer counts of a SKU with a purchase
	// limit set to what MySQL invoiced plus the open reservations.
	CustomerCounts []CountChange `json:"customer_counts,omitempty"`
	Before         Counters      `json:"before"`
	After          Counters      `json:"after"`
	// Aligned is true when stock and sold were set to MySQL's; false when
	// a stock load or a commit raced the repair and they were kept.
	Aligned bool `json:"aligned"`
}

// LimitChange is a SKU's purchase limit per customer as found in Redis
// and as set (0: none).
type LimitChange struct {
	Old int `json:"old"`
	New int `json:"new"`
}

// CountChange is one customer's count of units against a SKU's purchase
// limit, as found in Redis (Old, -1 when missing) and as set (New).
type CountChange struct {
	Customer string `json:"customer"`
	Old      int    `json:"old"`
	New      int    `json:"new"`
}

// SKUReport is the machine-readable account of one SKU.
type SKUReport struct {
	SKU     string     `json:"sku"`
	Outcome SKUOutcome `json:"outcome"`
	DryRun  bool       `json:"dry_run,omitempty"`
	// Attempts counts the read-plan-apply rounds (a round is repeated when
	// live commits moved sold meanwhile).
	Attempts int `json:"attempts"`
	// Found is what the last round read.
	Found *Found `json:"found,omitempty"`
	// Repairs lists every round that changed something.
	Repairs []Changes `json:"repairs,omitempty"`
	// After is the SKU in Redis after the last round.
	After *Counters `json:"after,omitempty"`
	Error string    `json:"error,omitempty"`
}

// ReconcileReport is the account of a run over several SKUs. ExitCode is
// the run's exit code as pkg/reconcile defines it.
type ReconcileReport struct {
	StartedAt  time.Time          `json:"started_at"`
	FinishedAt time.Time          `json:"finished_at"`
	DryRun     bool               `json:"dry_run"`
	Summary    map[SKUOutcome]int `json:"summary"`
	SKUs       []SKUReport        `json:"skus"`
	ExitCode   int                `json:"exit_code"`
	Errors     map[string]string  `json:"errors,omitempty"`
}
