package ops_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/redis/go-redis/v9"

	"surge/internal/testenv"
	"surge/internal/testkit"
	"surge/pkg/admin"
	"surge/pkg/ops"
	"surge/pkg/stock"
)

// lostReply runs the stock scripts on Redis (ran) or drops them, and
// reports a timeout either way: a call whose reply never came back, or
// whose request never arrived. The caller cannot tell the two apart.
type lostReply struct {
	*redis.ClusterClient
	ran bool
}

func (l lostReply) EvalSha(ctx context.Context, sha string, ks []string, args ...any) *redis.Cmd {
	return l.lose(ctx, func() *redis.Cmd { return l.ClusterClient.EvalSha(ctx, sha, ks, args...) })
}

func (l lostReply) Eval(ctx context.Context, src string, ks []string, args ...any) *redis.Cmd {
	return l.lose(ctx, func() *redis.Cmd { return l.ClusterClient.Eval(ctx, src, ks, args...) })
}

func (l lostReply) lose(ctx context.Context, run func() *redis.Cmd) *redis.Cmd {
	c := redis.NewCmd(ctx)
	if l.ran {
		c = run()
	}
	if c.Err() == nil {
		c.SetErr(context.DeadlineExceeded)
	}
	return c
}

// looseness orders purchase limits: no limit (0) is the loosest.
func looseness(limit int) int {
	if limit == 0 {
		return math.MaxInt
	}
	return limit
}

// TestLoadWhoseReplyIsLost: a stock load whose Redis call failed without
// an answer (the script ran or not) fails, asking to load again, and
// leaves MySQL holding the higher of the old and new stock and the looser
// of the old and new purchase limits, so that whatever Redis holds, it
// sells no unit and admits no purchase MySQL would not: Redis ends no
// looser than MySQL.
func TestLoadWhoseReplyIsLost(t *testing.T) {
	ctx := context.Background()
	rdb := testenv.Redis(t)
	if err := stock.LoadScripts(ctx, rdb); err != nil {
		t.Fatal(err)
	}
	db, _ := testkit.Store(t)
	good := &ops.Stock{DB: db, Redis: stock.New(rdb, stock.Options{})}
	type load struct{ stock, limit int }
	cases := []struct {
		name     string
		from, to load
		held     load // what MySQL must hold after the lost reply
	}{
		{"limit lowered", load{10, 5}, load{10, 2}, load{10, 5}},
		{"limit set", load{10, 0}, load{10, 3}, load{10, 0}},
		{"limit raised, stock lowered", load{10, 2}, load{8, 5}, load{10, 5}},
		{"limit removed, stock raised", load{10, 3}, load{12, 0}, load{12, 0}},
		{"limit lowered, stock raised", load{10, 5}, load{12, 2}, load{12, 5}},
		{"stock lowered", load{10, 2}, load{8, 2}, load{10, 2}},
	}
	for i, c := range cases {
		for _, ran := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/ran=%t", c.name, ran), func(t *testing.T) {
				sku := testenv.Unique(fmt.Sprint("lost", i, "-"))
				testenv.CleanupSKU(t, rdb, sku)
				req := func(l load) admin.LoadRequest { return admin.LoadRequest{Stock: &l.stock, MaxPerCustomer: &l.limit} }
				if _, err := good.Load(ctx, sku, req(c.from)); err != nil {
					t.Fatal(err)
				}
				lossy := &ops.Stock{DB: db, Redis: stock.New(lostReply{rdb, ran}, stock.Options{})}
				if _, err := lossy.Load(ctx, sku, req(c.to)); err == nil {
					t.Fatal("a load whose reply was lost succeeded")
				}
				rep, err := good.Show(ctx, sku)
				if err != nil {
					t.Fatal(err)
				}
				m, r := rep.MySQL, rep.Redis
				if got := (load{m.Stock, m.MaxPerCustomer}); got != c.held {
					t.Errorf("MySQL holds stock %d limit %d, want stock %d limit %d", got.stock, got.limit, c.held.stock, c.held.limit)
				}
				if r.Stock > m.Stock || looseness(r.MaxPerCustomer) > looseness(m.MaxPerCustomer) {
					t.Errorf("Redis (stock %d, limit %d) looser than MySQL (stock %d, limit %d)",
						r.Stock, r.MaxPerCustomer, m.Stock, m.MaxPerCustomer)
				}
			})
		}
	}
}
