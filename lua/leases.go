package lua

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed lock_acquire.lua
	lockAcquireSrc string
	//go:embed lock_acquire_many.lua
	lockAcquireManySrc string
	//go:embed lease_release.lua
	leaseReleaseSrc string
	//go:embed lease_release_many.lua
	leaseReleaseManySrc string
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
	// LockAcquireMany and LeaseReleaseMany take and give up several leases
	// of one hash tag in one call.
	LockAcquireMany  = redis.NewScript(lockAcquireManySrc)
	LeaseReleaseMany = redis.NewScript(leaseReleaseManySrc)
	LeaseExtend      = redis.NewScript(leaseExtendSrc)
	CacheClaim       = redis.NewScript(cacheClaimSrc)
	CachePut         = redis.NewScript(cachePutSrc)
	CacheSwap        = redis.NewScript(cacheSwapSrc)
)

// leaseScripts lists the scripts of this file for All.
func leaseScripts() []*redis.Script {
	return []*redis.Script{LockAcquire, LockAcquireMany, LeaseRelease, LeaseReleaseMany, LeaseExtend, CacheClaim, CachePut, CacheSwap}
}
