// Package lua embeds surge's Redis scripts. Each .lua file opens with its
// KEYS / ARGV / return contract; callers in pkg/stock turn return codes into
// typed errors. go:embed cannot reach "..", hence this tiny package.
package lua

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed reserve.lua
	reserveSrc string
	//go:embed commit.lua
	commitSrc string
	//go:embed commit_many.lua
	commitManySrc string
	//go:embed release.lua
	releaseSrc string
	//go:embed load.lua
	loadSrc string
	//go:embed view.lua
	viewSrc string
)

// The scripts. redis.Script sends EVALSHA and falls back to EVAL once when
// a node does not know the script yet (after a restart or failover).
var (
	Reserve = redis.NewScript(reserveSrc)
	Commit  = redis.NewScript(commitSrc)
	// CommitMany settles several orders of one SKU in one call.
	CommitMany = redis.NewScript(commitManySrc)
	Release    = redis.NewScript(releaseSrc)
	Load       = redis.NewScript(loadSrc)
	View       = redis.NewScript(viewSrc)
)

// All lists every script, for loading them on each master at start-up.
func All() []*redis.Script {
	return append([]*redis.Script{Reserve, Commit, CommitMany, Release, Load, View, Reconcile, Adopt, Counts, Admit, Record, OrderState, Existing, Sighting}, leaseScripts()...)
}
