package stock

import (
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestWithoutReplica: an undo no replica acknowledged counts as done only
// when the slot map lists its master with no replica at all.
func TestWithoutReplica(t *testing.T) {
	node := func(id string) redis.ClusterNode { return redis.ClusterNode{ID: id} }
	slots := []redis.ClusterSlot{
		{Start: 0, End: 5460, Nodes: []redis.ClusterNode{node("m1"), node("r1")}},
		{Start: 5461, End: 10922, Nodes: []redis.ClusterNode{node("m2")}},
		{Start: 10923, End: 16383, Nodes: []redis.ClusterNode{node("m3"), node("r3")}},
	}
	for _, c := range []struct {
		master string
		want   bool
	}{
		{"m1", false}, // a replica that could be promoted without the undo
		{"m2", true},  // nothing to promote
		{"r1", false}, // not a master of the map: no claim either way
		{"gone", false},
	} {
		if got := withoutReplica(c.master, slots); got != c.want {
			t.Errorf("withoutReplica(%s) = %v, want %v", c.master, got, c.want)
		}
	}
}
