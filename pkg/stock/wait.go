package stock

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"surge/lua"
)

// masterFinder finds the master serving a key. *redis.ClusterClient
// implements it.
type masterFinder interface {
	MasterForKey(ctx context.Context, key string) (*redis.Client, error)
}

var _ masterFinder = (*redis.ClusterClient)(nil)

// ErrNotReplicated means fewer replicas than Options.WaitReplicas
// acknowledged a reservation in time. The reservation stands until the
// caller undoes it.
var ErrNotReplicated = errors.New("reservation not acknowledged by enough replicas")

// runReserve runs the reserve script; with Options.WaitReplicas it runs it
// and WAIT on one connection of the SKU's master (WAIT only covers the
// writes of its own connection), and fails when the replicas did not
// acknowledge a new reservation in time.
func (s *Stock) runReserve(ctx context.Context, ks []string, args ...any) ([]int64, error) {
	if s.opts.WaitReplicas <= 0 {
		return lua.Reserve.Run(ctx, s.rdb, ks, args...).Int64Slice()
	}
	mf, ok := s.rdb.(masterFinder)
	if !ok {
		return nil, fmt.Errorf("wait for replicas: %T cannot find a key's master", s.rdb)
	}
	node, err := mf.MasterForKey(ctx, ks[0])
	if err != nil {
		return nil, fmt.Errorf("find master: %w", err)
	}
	conn := node.Conn()
	defer conn.Close()
	res, err := lua.Reserve.Run(ctx, conn, ks, args...).Int64Slice()
	if err != nil || len(res) == 0 || res[0] != 1 {
		return res, err // nothing new to wait for
	}
	acked, err := conn.Wait(ctx, s.opts.WaitReplicas, s.opts.WaitTimeout).Result()
	if err == nil && acked >= int64(s.opts.WaitReplicas) {
		return res, nil
	}
	if err == nil {
		err = fmt.Errorf("%w: %d of %d within %s", ErrNotReplicated, acked, s.opts.WaitReplicas, s.opts.WaitTimeout)
	}
	// The reservation stands; the caller takes it back with Undo and the
	// nonce, as after any other failed Reserve.
	return nil, fmt.Errorf("wait for replicas: %w", err)
}
