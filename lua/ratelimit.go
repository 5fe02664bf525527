package lua

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

//go:embed ratelimit.lua
var rateLimitSrc string

// RateLimit spends one request of a subject's budget (pkg/ratelimit). It is
// not in All: the first call loads it through EVALSHA's EVAL fallback.
var RateLimit = redis.NewScript(withGCRA(rateLimitSrc))
