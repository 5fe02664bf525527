package lua

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

//go:embed sighting.lua
var sightingSrc string

// Sighting reads a SKU's units left and whether order ids name reserved
// orders, for the gateway's sold-out answers (pkg/stock).
var Sighting = redis.NewScript(sightingSrc)
