package admin

import "context"

// LoadedBy names who loads stock and through what, for the audit row
// (MySQL stock_loads) the load writes in its own transaction. It rides on
// the load's context (WithLoadedBy), so the stock-setting signatures and
// LoadRequest stay as they are.
type LoadedBy struct {
	// Actor is the operator (ValidateActor).
	Actor string
	// Via is the way in: ViaConsole, ViaOpsctl or ViaAdminAPI.
	Via string
}

// The ways a stock load comes in.
const (
	ViaConsole  = "console"
	ViaOpsctl   = "opsctl"
	ViaAdminAPI = "admin-api"
	// ViaUnknown marks a load whose caller named nobody (tests, tools).
	ViaUnknown = "unknown"
)

type loadedByKey struct{}

// WithLoadedBy returns ctx carrying who loads stock with it.
func WithLoadedBy(ctx context.Context, by LoadedBy) context.Context {
	return context.WithValue(ctx, loadedByKey{}, by)
}

// LoadedByFrom is who ctx says loads stock; Via is ViaUnknown when it
// says nothing.
func LoadedByFrom(ctx context.Context) LoadedBy {
	by, _ := ctx.Value(loadedByKey{}).(LoadedBy)
	if by.Via == "" {
		by.Via = ViaUnknown
	}
	return by
}
