package stock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/redis/go-redis/v9"

	"surge/lua"
)

// LoadScriptsReachable is LoadScripts for a service starting while a master
// may be down or cut off (its slots about to fail over): a master that
// cannot be reached (refused, timed out) is skipped and named in skipped,
// and go-redis's EVAL fallback loads the scripts there, or on the replica
// promoted in its place, at first use. Any other failure (a user without
// the right to load scripts) is an error, and so is every master
// unreachable: nothing could be served.
func LoadScriptsReachable(ctx context.Context, rdb *redis.ClusterClient) (skipped []string, err error) {
	var mu sync.Mutex
	masters := 0
	err = rdb.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		err := loadOn(ctx, n)
		mu.Lock()
		defer mu.Unlock()
		masters++
		if err != nil && unreachable(err) {
			skipped = append(skipped, n.Options().Addr)
			return nil
		}
		return err
	})
	if err != nil {
		return skipped, err
	}
	if masters > 0 && len(skipped) == masters {
		return skipped, fmt.Errorf("load scripts: no master reachable (%v)", skipped)
	}
	return skipped, nil
}

// loadOn loads every script on one node.
func loadOn(ctx context.Context, n *redis.Client) error {
	for _, s := range lua.All() {
		if err := s.Load(ctx, n).Err(); err != nil {
			return fmt.Errorf("load script on %s: %w", n.Options().Addr, err)
		}
	}
	return nil
}

// unreachable tells a node that did not answer from one that answered no.
func unreachable(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded)
}
