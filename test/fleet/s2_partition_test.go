//go:build fleet

package fleet

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"surge/internal/testenv"
	"surge/pkg/keys"
)

// TestRedisMasterHostCut: the host holding the SKU's Redis master is cut
// off (its link down) three seconds into the sale. The cut-off master
// goes on taking writes until cluster-node-timeout (3 s) tells it that it
// is in the minority, then refuses them (CLUSTERDOWN); on the majority its
// replica is promoted, the gateways follow the new slot map, the sale goes
// on. The host comes back, its old master rejoins as a replica (what it
// took alone is dropped), its RabbitMQ node (pause_minority) resumes, and
// the reconciler brings Redis back to MySQL.
func TestRedisMasterHostCut(t *testing.T) {
	f := getFleet(t)
	f.healthy(t)
	sku := testenv.Unique("fleet-cut")
	key := keys.Avail(sku)
	ctx := context.Background()
	f.redis.ReloadState(ctx)
	m, err := f.redis.MasterForKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	masterAddr := m.Options().Addr
	host := f.hostOf(t, strings.Split(masterAddr, ":")[0])
	t.Logf("%s lives on the master %s on %s", sku, masterAddr, host)
	probe := "{sku:" + sku + "}:fleet-probe"

	var cutAt, refusedAt, promotedAt, healedAt, rejoinedAt time.Time
	var tookAlone int
	var newMaster string
	s := f.runSale(t, sku, 3000, func() {
		after(time.Now(), 3*time.Second)
		f.sh(t, "cut", host)
		cutAt = time.Now()
		// The minority side: writes to the old master from its own host.
		for time.Since(cutAt) < 20*time.Second {
			out := f.redisCLIOn(host, masterAddr, "SET", probe, fmt.Sprint(time.Now().UnixNano()))
			if strings.Contains(out, "CLUSTERDOWN") {
				refusedAt = time.Now()
				break
			}
			if out == "OK" {
				tookAlone++
			}
			time.Sleep(100 * time.Millisecond)
		}
		// The majority side: the slot's master seen from another host.
		for time.Since(cutAt) < 30*time.Second {
			if a := f.slotMaster(t, key, host); a != "" && a != masterAddr {
				promotedAt, newMaster = time.Now(), a
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		after(cutAt, 12*time.Second)
		f.sh(t, "heal", host)
		healedAt = time.Now()
		for time.Since(healedAt) < 30*time.Second {
			if strings.Contains(f.redisCLIOn(host, masterAddr, "ROLE"), "slave") {
				rejoinedAt = time.Now()
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	since := func(t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return fmt.Sprintf("%.1fs", t.Sub(cutAt).Seconds())
	}
	t.Logf("cut at sale +%.1fs; the minority master took %d probe writes alone, refused writes at %s; "+
		"replica %s promoted at %s; link back at %s; old master a replica again at %s (after the cut)",
		cutAt.Sub(s.start).Seconds(), tookAlone, since(refusedAt), newMaster, since(promotedAt),
		since(healedAt), since(rejoinedAt))
	if refusedAt.IsZero() {
		t.Errorf("the cut-off master never refused writes")
	}
	if promotedAt.IsZero() {
		t.Errorf("the majority never promoted a replica")
	}
	if rejoinedAt.IsZero() {
		t.Errorf("the old master did not rejoin as a replica")
	}
	if n, err := f.redis.Exists(ctx, probe).Result(); err == nil && n != 0 {
		t.Errorf("a write the cut-off master took alone survived the rejoin")
	}
	f.check(t, s, 90*time.Second)
	f.healthy(t)
}

// hostOf names the fleet host with address ip.
func (f *fleet) hostOf(t *testing.T, ip string) string {
	t.Helper()
	for _, h := range []string{"h1", "h2", "h3"} {
		if strings.HasSuffix(ip, "."+map[string]string{"h1": "11", "h2": "12", "h3": "13"}[h]) {
			return h
		}
	}
	t.Fatalf("no data host has address %s", ip)
	return ""
}

// redisCLIOn runs redis-cli inside host against addr (2 s at most).
func (f *fleet) redisCLIOn(host, addr string, args ...string) string {
	ip, port, _ := strings.Cut(addr, ":")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", "surge-" + host,
		"redis-cli", "--no-auth-warning", "-a", f.env["SURGE_REDIS_PASSWORD"], "-h", ip, "-p", port}, args...)...).
		CombinedOutput()
	return strings.TrimSpace(string(out))
}

// slotMaster is the master of key's slot as a master off host sees it.
func (f *fleet) slotMaster(t *testing.T, key, host string) string {
	for _, a := range strings.Split(f.env["SURGE_REDIS_ADDRS"], ",") {
		if f.hostOf(t, strings.Split(a, ":")[0]) == host {
			continue
		}
		c := redis.NewClient(&redis.Options{Addr: a, Password: f.env["SURGE_REDIS_PASSWORD"],
			DialTimeout: time.Second, ReadTimeout: time.Second})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		slot, err := c.ClusterKeySlot(ctx, key).Result()
		var master string
		if err == nil {
			slots, err := c.ClusterSlots(ctx).Result()
			if err == nil {
				for _, r := range slots {
					if int64(r.Start) <= slot && slot <= int64(r.End) && len(r.Nodes) > 0 {
						master = r.Nodes[0].Addr
					}
				}
			}
		}
		cancel()
		_ = c.Close()
		if master != "" {
			return master
		}
	}
	return ""
}
