package ceiling

import (
	"context"
	"errors"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"surge/internal/testenv"
	"surge/pkg/keys"
	"surge/pkg/store"
)

const short = 300 * time.Millisecond

func TestRedisEvalshaReservesAndCleansUp(t *testing.T) {
	rdb := testenv.Redis(t)
	sku := testenv.Unique("ceiling-")
	testenv.CleanupSKU(t, rdb, sku)
	res, err := RedisEvalsha(context.Background(), rdb, RedisOptions{SKU: sku, Workers: 4, Duration: short, StateTTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops == 0 || res.PerSec <= 0 || res.Name != "redis_evalsha" {
		t.Fatalf("result %+v: want reservations counted", res)
	}
	n, err := rdb.Exists(context.Background(), keys.Avail(sku), keys.Resv(sku), keys.Stock(sku)).Result()
	if err != nil || n != 0 {
		t.Fatalf("%d stock keys left after the run (err %v), want 0", n, err)
	}
}

func TestRedisEvalshaPipelined(t *testing.T) {
	rdb := testenv.Redis(t)
	sku := testenv.Unique("ceiling-")
	testenv.CleanupSKU(t, rdb, sku)
	res, err := RedisEvalsha(context.Background(), rdb, RedisOptions{SKU: sku, Workers: 2, Pipeline: 10, Duration: short, StateTTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops == 0 || res.Ops%10 != 0 || res.Name != "redis_evalsha_pipelined" {
		t.Fatalf("result %+v: want whole pipelines of 10 counted", res)
	}
}

func TestAMQPConfirmedPublishesAndDeletesItsQueue(t *testing.T) {
	url := testenv.AMQPURL(t)
	q := testenv.Unique("ceiling.")
	res, err := AMQPConfirmed(context.Background(), url, AMQPOptions{Queue: q, Channels: 2, Window: 16, Duration: short})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops == 0 || res.Workers != 2 {
		t.Fatalf("result %+v: want confirmed publishes on 2 channels", res)
	}
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	_, err = ch.QueueDeclarePassive(q, true, false, false, false, nil)
	var aerr *amqp.Error
	if !errors.As(err, &aerr) || aerr.Code != amqp.NotFound {
		t.Fatalf("passive declare of %s after the run: %v, want 404 not found", q, err)
	}
}

func TestMySQLBatchInsertCountsRowsAndDropsItsTable(t *testing.T) {
	ctx := context.Background()
	s, err := store.Open(ctx, testenv.MySQLDSN(t), store.Options{MaxOpenConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := MySQLBatchInsert(ctx, s.DB().DB, MySQLOptions{Table: "ceiling_t", Workers: 2, Batch: 50, Duration: short})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops == 0 || res.Ops%50 != 0 {
		t.Fatalf("result %+v: want whole batches of 50 rows", res)
	}
	var n int
	err = s.DB().GetContext(ctx, &n, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = 'ceiling_t'")
	if err != nil || n != 0 {
		t.Fatalf("table ceiling_t still exists (%d, %v)", n, err)
	}
}

func TestDriveStopsOnTheFirstError(t *testing.T) {
	boom := errors.New("boom")
	_, err := drive(context.Background(), "x", 3, time.Minute, func(_ context.Context, w int, i int64) (int, error) {
		if w == 1 && i == 5 {
			return 0, boom
		}
		return 1, nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("drive error = %v, want boom", err)
	}
	if _, err := drive(context.Background(), "x", 0, time.Second, nil); err == nil {
		t.Fatal("drive with no workers succeeded")
	}
}

func TestHTTPEmptyCountsEveryAnswer(t *testing.T) {
	res, err := HTTPEmpty(context.Background(), HTTPOptions{Concurrency: 8, Duration: short})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops == 0 || res.PerSec <= 0 || res.Name != "http_empty_handler" {
		t.Fatalf("result %+v: want answered requests counted", res)
	}
}
