package reconcile

import "context"

type operatorKey struct{}

// WithOperator names the person a run is for (the admin API's
// X-Surge-Operator, the console's signed-in operator, opsctl's user): the
// repairs it records carry the name. A run without one is the schedule's.
func WithOperator(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, operatorKey{}, name)
}

// Operator is the name WithOperator put in ctx, or "" (the schedule).
func Operator(ctx context.Context) string {
	s, _ := ctx.Value(operatorKey{}).(string)
	return s
}
