package lua

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

//go:embed reconcile.lua
var reconcileSrc string

// Reconcile aligns one SKU's stock keys with MySQL after a failover lost
// writes: it commits, releases, sets stock and sold, and recomputes avail,
// each change conditional on what the caller read (see reconcile.lua).
var Reconcile = redis.NewScript(reconcileSrc)

//go:embed adopt.lua
var adoptSrc string

// Adopt marks orders the reconciler publishes again because their
// reservation waited past the grace period with no order in MySQL (see
// adopt.lua).
var Adopt = redis.NewScript(adoptSrc)

//go:embed counts.lua
var countsSrc string

// Counts aligns the per-customer counts of a SKU with a purchase limit
// with MySQL and the open reservations (see counts.lua).
var Counts = redis.NewScript(countsSrc)
