package stock

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"surge/lua"
)

// MasterFinder finds the master serving a key. *redis.ClusterClient
// implements it.
type MasterFinder interface {
	MasterForKey(ctx context.Context, key string) (*redis.Client, error)
}

var _ MasterFinder = (*redis.ClusterClient)(nil)

// ErrNotReplicated means fewer replicas than wanted acknowledged a write
// in time: a reservation (Options.WaitReplicas), which stands until the
// caller undoes it, or an undo, which a failover could still lose.
var ErrNotReplicated = errors.New("not acknowledged by enough replicas")

// runReserve runs the reserve script; with Options.WaitReplicas it runs it
// and WAIT on one connection of the SKU's master (WAIT only covers the
// writes of its own connection), and fails when the replicas did not
// acknowledge a new reservation in time.
func (s *Stock) runReserve(ctx context.Context, ks []string, args ...any) ([]int64, error) {
	if s.opts.WaitReplicas <= 0 {
		return lua.Reserve.Run(ctx, s.rdb, ks, args...).Int64Slice()
	}
	conn, err := s.masterConn(ctx, ks[0])
	if err != nil {
		return nil, err
	}
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

// masterConn is one connection of the master serving key.
func (s *Stock) masterConn(ctx context.Context, key string) (*redis.Conn, error) {
	if s.opts.Masters == nil {
		return nil, fmt.Errorf("wait for replicas: %T cannot find a key's master (stock.Options.Masters)", s.rdb)
	}
	node, err := s.opts.Masters.MasterForKey(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("find master: %w", err)
	}
	return node.Conn(), nil
}

// runRelease runs the release script.
func (s *Stock) runRelease(ctx context.Context, ks []string, args ...any) (int64, error) {
	return lua.Release.Run(ctx, s.rdb, ks, args...).Int64()
}

// runUndo runs the release script in mode undo and WAIT on one connection
// of the SKU's master. Every undo that ran writes (its mark, at least), so
// every one waits, unless it was refused (a negative reply: the caller
// treats the order as possibly taken anyway). It fails with
// ErrNotReplicated, and the script's reply, when the replicas did not
// acknowledge in time.
func (s *Stock) runUndo(ctx context.Context, ks []string, args ...any) (int64, error) {
	conn, err := s.masterConn(ctx, ks[0])
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	n, err := lua.Release.Run(ctx, conn, ks, args...).Int64()
	if err != nil || n < 0 {
		return n, err
	}
	return n, s.waitUndo(ctx, conn)
}

// waitUndo waits until Options.WaitReplicas replicas, and at least one,
// acknowledged what conn wrote. When fewer did within
// Options.UndoWaitTimeout, it asks the cluster whether the master has a
// replica at all: with none (a cluster of masters only, as some
// development setups are) no failover can bring back a state without the
// undo, and waiting longer would only turn every "not taken" into an
// unknown outcome, so the undo counts as done; it is then as durable as
// the master's own persistence.
func (s *Stock) waitUndo(ctx context.Context, conn *redis.Conn) error {
	want := max(s.opts.WaitReplicas, 1)
	acked, err := conn.Wait(ctx, want, s.opts.UndoWaitTimeout).Result()
	if err != nil {
		return fmt.Errorf("wait for replicas: %w", err)
	}
	if acked >= int64(want) {
		return nil
	}
	var id *redis.StringCmd
	var slots *redis.ClusterSlotsCmd
	_, err = conn.Pipelined(ctx, func(p redis.Pipeliner) error {
		id, slots = p.ClusterMyID(ctx), p.ClusterSlots(ctx)
		return nil
	})
	if err == nil && withoutReplica(id.Val(), slots.Val()) {
		return nil
	}
	return fmt.Errorf("%w: %d of %d within %s", ErrNotReplicated, acked, want, s.opts.UndoWaitTimeout)
}

// withoutReplica tells whether the cluster's slot map lists the master
// with node id master, serving slots, and no replica of it (CLUSTER SLOTS
// leaves out failed nodes, which cannot be promoted).
func withoutReplica(master string, slots []redis.ClusterSlot) bool {
	found := false
	for _, sl := range slots {
		if len(sl.Nodes) == 0 || sl.Nodes[0].ID != master {
			continue
		}
		if len(sl.Nodes) > 1 {
			return false
		}
		found = true
	}
	return found
}
