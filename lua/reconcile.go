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
