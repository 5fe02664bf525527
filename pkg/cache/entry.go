package cache

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strconv"
	"time"

	"surge/lua"
	"surge/pkg/keys"
)

// entry is one cached value as stored in its hash.
type entry struct {
	present bool
	value   []byte
	miss    bool          // the loader reported ErrNotFound
	expiry  time.Time     // soft expiry: stale from then on
	delta   time.Duration // how long the load took (XFetch)
	version string        // the writer's token; changes on every write
}

// fields are the hash fields, in the order HMGET and cache_claim return
// them.
var fields = []string{"v", "exp", "dl", "m", "ver"}

// parseEntry reads an HMGET-style reply of fields; all nil means missing.
func parseEntry(raw []any) (entry, error) {
	if len(raw) != len(fields) {
		return entry{}, fmt.Errorf("unexpected entry reply of %d fields", len(raw))
	}
	s := make([]string, len(raw))
	present := false
	for i, r := range raw {
		if v, ok := r.(string); ok {
			s[i], present = v, true
		}
	}
	if !present {
		return entry{}, nil
	}
	exp, err1 := strconv.ParseInt(s[1], 10, 64)
	dl, err2 := strconv.ParseInt(s[2], 10, 64)
	if err1 != nil || err2 != nil || s[4] == "" {
		return entry{}, fmt.Errorf("malformed entry: exp=%q dl=%q ver=%q", s[1], s[2], s[4])
	}
	return entry{
		present: true, value: []byte(s[0]), miss: s[3] == "1",
		expiry: time.UnixMilli(exp), delta: time.Duration(dl) * time.Microsecond, version: s[4],
	}, nil
}

func (c *Cache) key(id string) string   { return keys.Cache(c.opts.Namespace, id) }
func (c *Cache) lease(id string) string { return keys.CacheLease(c.opts.Namespace, id) }

// read fetches id's entry in one HMGET.
func (c *Cache) read(ctx context.Context, id string) (entry, error) {
	raw, err := c.rdb.HMGet(ctx, c.key(id), fields...).Result()
	if err != nil {
		return entry{}, fmt.Errorf("read cache %s %s: %w", c.opts.Namespace, id, err)
	}
	e, err := parseEntry(raw)
	if err != nil {
		return entry{}, fmt.Errorf("read cache %s %s: %w", c.opts.Namespace, id, err)
	}
	return e, nil
}

// claim reads id's entry and takes its rebuild lease with token when the
// entry is still at version seen ("" for missing).
func (c *Cache) claim(ctx context.Context, id, token, seen string) (leased bool, e entry, err error) {
	raw, err := lua.CacheClaim.Run(ctx, c.rdb, []string{c.key(id), c.lease(id)},
		token, c.opts.LeaseTTL.Milliseconds(), seen).Slice()
	if err == nil && len(raw) != 1+len(fields) {
		err = fmt.Errorf("unexpected reply of %d fields", len(raw))
	}
	if err == nil {
		e, err = parseEntry(raw[1:])
	}
	if err != nil {
		return false, entry{}, fmt.Errorf("claim cache %s %s: %w", c.opts.Namespace, id, err)
	}
	n, _ := raw[0].(int64)
	return n == 1, e, nil
}

// put stores e (whose version is the rebuild's token) and frees the lease.
func (c *Cache) put(ctx context.Context, id string, e entry, ttl time.Duration) error {
	miss := "0"
	if e.miss {
		miss = "1"
	}
	hard := ttl + c.opts.Stale
	err := lua.CachePut.Run(ctx, c.rdb, []string{c.key(id), c.lease(id)}, e.version, e.value,
		e.expiry.UnixMilli(), e.delta.Microseconds(), miss, hard.Milliseconds()).Err()
	if err != nil {
		return fmt.Errorf("store cache %s %s: %w", c.opts.Namespace, id, err)
	}
	return nil
}

// unlease frees a lease whose rebuild failed, so another can start.
func (c *Cache) unlease(id, token string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = lua.LeaseRelease.Run(ctx, c.rdb, []string{c.lease(id)}, token).Err()
}

func newToken() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // crypto/rand.Read does not return errors since Go 1.24.
	return base64.RawURLEncoding.EncodeToString(b)
}

// swap replaces the value of id's entry when it is still at version seen.
func (c *Cache) swap(ctx context.Context, id, seen string, v []byte) (bool, error) {
	n, err := lua.CacheSwap.Run(ctx, c.rdb, []string{c.key(id)}, seen, newToken(), v).Int64()
	if err != nil {
		return false, fmt.Errorf("swap cache %s %s: %w", c.opts.Namespace, id, err)
	}
	return n == 1, nil
}
