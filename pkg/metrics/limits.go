package metrics

// LimitObserver counts the decisions of a rate limit by scope: allowed,
// limited, or error when the limiter failed. It implements
// httpapi.LimitObserver (the client address's limit, scope "ip").
type LimitObserver struct{}

// LimitDecided counts one decision.
func (LimitObserver) LimitDecided(scope string, allowed bool, err error) {
	decision := "allowed"
	switch {
	case err != nil:
		decision = "error"
	case !allowed:
		decision = "limited"
	}
	rateLimited.WithLabelValues(scope, decision).Inc()
}
