package lua

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

//go:embed order_state.lua
var orderStateSrc string

// OrderState reads an order's state and its reservation's age for
// GET /v1/orders/{id} (pkg/stock).
var OrderState = redis.NewScript(orderStateSrc)
