//go:build fleet

package fleet

import (
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"surge/internal/testenv"
)

// TestQuorumLeaderKilled: the RabbitMQ node leading orders.created is
// killed (SIGKILL) three seconds into the sale and started again ten
// seconds later. The queue elects a leader among the two others, the
// gateways and workers that used the dead node redial the next one, and
// every publish whose confirm died with the node was answered
// outcome_unknown, retried, and settled. The test sees the kill take
// effect: the node's AMQP port refuses connections, the cluster lists the
// node as not running, and the queue's leader moves to another node.
func TestQuorumLeaderKilled(t *testing.T) {
	f := getFleet(t)
	f.healthy(t)
	leader := f.sh(t, "rabbit-leader", "orders.created")
	amqpAddr := net.JoinHostPort(f.sh(t, "addr", leader), "5672")
	t.Logf("orders.created is led by the node on %s", leader)
	sku := testenv.Unique("fleet-rabbit")
	var killedAt, back time.Time
	refused, absent, moved := time.Duration(-1), time.Duration(-1), time.Duration(-1)
	var newLeader string
	survivor := "h1"
	if leader == survivor {
		survivor = "h2"
	}
	s := f.runSale(t, sku, 4000, func() {
		after(time.Now(), 3*time.Second)
		f.sh(t, "kill-rabbit", leader)
		killedAt = time.Now()
		// Seen from a node still up, beside the ten seconds the node stays
		// down (each look costs a rabbitmqctl run of a few seconds).
		var seenDown sync.WaitGroup
		seenDown.Add(1)
		go func() {
			defer seenDown.Done()
			refused = within(5*time.Second, func() bool { return dialRefused(amqpAddr) })
			absent = within(20*time.Second, func() bool {
				out, err := f.try("rabbit-running", survivor)
				return err == nil && out != "" && !slices.Contains(strings.Fields(out), leader)
			})
			moved = within(30*time.Second, func() bool {
				out, err := f.try("rabbit-leader", "orders.created", survivor)
				newLeader = out
				return err == nil && out != "" && out != leader
			})
		}()
		after(killedAt, 10*time.Second)
		f.sh(t, "start-rabbit", leader)
		back = time.Now()
		seenDown.Wait()
		t.Logf("killed the node on %s: its port refused %s, %s listed it not running %s, "+
			"the leader moved to %q %s", leader, seen(refused), survivor, seen(absent), newLeader, seen(moved))
		t.Logf("node on %s back in the cluster %.1fs after the kill", leader, back.Sub(killedAt).Seconds())
	})
	if refused < 0 {
		t.Errorf("after the kill, %s still accepted connections: the node on %s was not down", amqpAddr, leader)
	}
	if absent < 0 {
		t.Errorf("after the kill, the cluster still listed the node on %s running", leader)
	}
	if moved < 0 {
		t.Errorf("after the kill, orders.created was still led by the node on %s (last seen: %q)", leader, newLeader)
	}
	f.check(t, s, 90*time.Second)
	f.healthy(t)
}

// dialRefused tells whether a TCP connection to addr is refused: the
// host answers, nothing listens on the port.
func dialRefused(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		_ = c.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}
