package lua

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

//go:embed admit.lua
var admitSrc string

// Admit spends one request of a customer's budget and claims the order's
// idempotency record in one call (pkg/idem).
var Admit = redis.NewScript(withGCRA(admitSrc))

//go:embed record.lua
var recordSrc string

// Record forgets an idempotency record, or drops its sold-out mark, while
// the caller still holds it (pkg/idem).
var Record = redis.NewScript(recordSrc)

//go:embed existing.lua
var existingSrc string

// Existing reads the idempotency record a key has, by the master's clock,
// without claiming it (pkg/idem).
var Existing = redis.NewScript(existingSrc)
