package ceiling

import (
	"testing"
	"time"
)

func TestOptionsDefaults(t *testing.T) {
	s := 3 * time.Second
	amqpZero, amqpSet := AMQPOptions{Queue: "q"}, AMQPOptions{Queue: "q", Channels: 1, Window: 2, BodySize: 3, Duration: time.Second}
	amqpZero.setDefaults()
	amqpSet.setDefaults()
	httpZero, httpSet := HTTPOptions{}, HTTPOptions{Concurrency: 1, Duration: time.Second}
	httpZero.setDefaults()
	httpSet.setDefaults()
	mysqlZero, mysqlSet := MySQLOptions{Table: "t"}, MySQLOptions{Table: "t", Workers: 1, Batch: 2, Duration: time.Second}
	mysqlZero.setDefaults()
	mysqlSet.setDefaults()
	redisZero, redisSet := RedisOptions{SKU: "s"}, RedisOptions{SKU: "s", Workers: 1, Duration: time.Second, StateTTL: time.Hour, Pipeline: 4}
	redisZero.setDefaults()
	redisSet.setDefaults()
	tests := []struct {
		name      string
		got, want any
	}{
		{"amqp zero", amqpZero, AMQPOptions{Queue: "q", Channels: 8, Window: 128, BodySize: 160, Duration: s}},
		{"amqp set", amqpSet, AMQPOptions{Queue: "q", Channels: 1, Window: 2, BodySize: 3, Duration: time.Second}},
		{"http zero", httpZero, HTTPOptions{Concurrency: 256, Duration: s}},
		{"http set", httpSet, HTTPOptions{Concurrency: 1, Duration: time.Second}},
		{"mysql zero", mysqlZero, MySQLOptions{Table: "t", Workers: 4, Batch: 500, Duration: s}},
		{"mysql set", mysqlSet, MySQLOptions{Table: "t", Workers: 1, Batch: 2, Duration: time.Second}},
		{"redis zero", redisZero, RedisOptions{SKU: "s", Workers: 64, Duration: s, StateTTL: time.Minute}},
		{"redis set", redisSet, RedisOptions{SKU: "s", Workers: 1, Duration: time.Second, StateTTL: time.Hour, Pipeline: 4}},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %+v, want %+v", tt.name, tt.got, tt.want)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	for name, err := range map[string]error{
		"amqp":  AMQPOptions{}.validate(),
		"mysql": MySQLOptions{Table: "a`b"}.validate(),
		"redis": RedisOptions{}.validate(),
	} {
		if err == nil {
			t.Errorf("%s: options without their required name were accepted", name)
		}
	}
}
