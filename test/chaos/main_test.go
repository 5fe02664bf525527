//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
)

// priv is the private Redis Cluster every test here breaks and heals.
var priv *privateCluster

// quietRedis drops go-redis's own log lines: a dead node makes every
// pool print one per failed dial, and the tests report what matters.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	if os.Getenv("SURGE_CHAOS_LOG") == "" {
		redis.SetLogger(quietRedis{})
	}
	var err error
	priv, err = startPrivateCluster()
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		if os.Getenv("CI") != "" {
			os.Exit(1)
		}
		fmt.Fprintln(os.Stderr, "chaos: skipped (no private Redis Cluster; CI would fail here)")
		os.Exit(0)
	}
	fmt.Printf("chaos: private Redis Cluster on 127.0.0.1:%d-%d\n", priv.Base, priv.Base+5)
	code := m.Run()
	priv.stop()
	for _, line := range measurements {
		fmt.Println("chaos:", line)
	}
	os.Exit(code)
}
