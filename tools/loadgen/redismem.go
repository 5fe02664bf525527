package loadgen

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// RedisMemory is the cluster's memory summed over its masters.
type RedisMemory struct {
	UsedMemory int64 `json:"used_memory"`
	Keys       int64 `json:"keys"`
}

// ReadRedisMemory sums INFO used_memory and DBSIZE over the masters.
func ReadRedisMemory(ctx context.Context, rdb *redis.ClusterClient) (RedisMemory, error) {
	var used, keys atomic.Int64
	err := rdb.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		info, err := n.Info(ctx, "memory").Result()
		if err != nil {
			return fmt.Errorf("info memory on %s: %w", n.Options().Addr, err)
		}
		v, err := infoField(info, "used_memory")
		if err != nil {
			return fmt.Errorf("info memory on %s: %w", n.Options().Addr, err)
		}
		size, err := n.DBSize(ctx).Result()
		if err != nil {
			return fmt.Errorf("dbsize on %s: %w", n.Options().Addr, err)
		}
		used.Add(v)
		keys.Add(size)
		return nil
	})
	if err != nil {
		return RedisMemory{}, err
	}
	return RedisMemory{UsedMemory: used.Load(), Keys: keys.Load()}, nil
}

// ReclaimExpired walks each master's keyspace once with SCAN, which makes
// Redis delete the keys it finds expired. Expired keys are otherwise
// reclaimed lazily (on access, or by sampling), and a memory reading would
// count short-lived keys that are already gone for every client.
func ReclaimExpired(ctx context.Context, rdb *redis.ClusterClient) error {
	return rdb.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		var cursor uint64
		for {
			_, next, err := n.Scan(ctx, cursor, "", 1000).Result()
			if err != nil {
				return fmt.Errorf("scan %s: %w", n.Options().Addr, err)
			}
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	})
}

func infoField(info, name string) (int64, error) {
	for line := range strings.SplitSeq(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && k == name {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s field", name)
}

// RecordAudit describes a sample of the per-order records a run left in
// Redis (idempotency records, order states).
type RecordAudit struct {
	Checked int64 `json:"checked"`
	// Missing keys had expired or were never written.
	Missing int64 `json:"missing"`
	// NoTTL keys would live forever: each one is a leak.
	NoTTL int64 `json:"no_ttl"`
	// MaxTTLSeconds is the longest remaining lifetime seen.
	MaxTTLSeconds float64 `json:"max_ttl_s"`
	// AvgBytes is the mean MEMORY USAGE of the keys present.
	AvgBytes float64 `json:"avg_bytes"`
}

// Present returns the share of the checked keys that exist, 0 when none
// were checked.
func (a RecordAudit) Present() float64 {
	if a.Checked == 0 {
		return 0
	}
	return float64(a.Checked-a.Missing) / float64(a.Checked)
}

// AuditRecords checks that each key expires and measures its size.
func AuditRecords(ctx context.Context, rdb redis.Cmdable, keys []string) (RecordAudit, error) {
	var a RecordAudit
	var bytes int64
	for _, k := range keys {
		ttl, err := rdb.TTL(ctx, k).Result()
		if err != nil {
			return RecordAudit{}, fmt.Errorf("ttl %s: %w", k, err)
		}
		a.Checked++
		switch {
		case ttl == -2: // go-redis returns the raw -2 / -1 replies as durations
			a.Missing++
			continue
		case ttl < 0:
			a.NoTTL++
		default:
			a.MaxTTLSeconds = max(a.MaxTTLSeconds, ttl.Seconds())
		}
		n, err := rdb.MemoryUsage(ctx, k).Result()
		if errors.Is(err, redis.Nil) {
			a.Missing++
			continue
		}
		if err != nil {
			return RecordAudit{}, fmt.Errorf("memory usage %s: %w", k, err)
		}
		bytes += n
	}
	if present := a.Checked - a.Missing; present > 0 {
		a.AvgBytes = round3(float64(bytes) / float64(present))
	}
	return a, nil
}
