package lua

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed lock_acquire.lua
	lockAcquireSrc string
	//go:embed lease_release.lua
	leaseReleaseSrc string
	//go:embed lease_extend.lua
	leaseExtendSrc string
	//go:embed cache_claim.lua
	cacheClaimSrc string
	//go:embed cache_put.lua
	cachePutSrc string
	//go:embed cache_swap.lua
	cacheSwapSrc string
)

// Lease scripts: distributed locks (pkg/lock) and cache rebuild leases
// (pkg/cache).
var (
	LockAcquire  = redis.NewScript(lockAcquireSrc)
	LeaseRelease = redis.NewScript(leaseReleaseSrc)
	LeaseExtend  = redis.NewScript(leaseExtendSrc)
	CacheClaim   = redis.NewScript(cacheClaimSrc)
	CachePut     = redis.NewScript(cachePutSrc)
	CacheSwap    = redis.NewScript(cacheSwapSrc)
)

// leaseScripts lists the scripts of this file for All.
func leaseScripts() []*redis.Script {
	return []*redis.Script{LockAcquire, LeaseRelease, LeaseExtend, CacheClaim, CachePut, CacheSwap}
}
