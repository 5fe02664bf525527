package queue

import (
	"net/url"
	"slices"
	"testing"
	"time"

	"surge/internal/testenv"
)

func TestSplitURLs(t *testing.T) {
	for in, want := range map[string][]string{
		"amqp://a:5672/":                     {"amqp://a:5672/"},
		"amqp://a:5672/, amqp://b:5672/,":    {"amqp://a:5672/", "amqp://b:5672/"},
		" , ":                                nil,
		"amqp://u:p@a/vh,amqp://u:p@b/vh,,c": {"amqp://u:p@a/vh", "amqp://u:p@b/vh", "c"},
	} {
		if got := SplitURLs(in); !slices.Equal(got, want) {
			t.Errorf("SplitURLs(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestConnFollowsTheCluster: with two nodes listed (two proxies to the
// test broker), the first dial skips a node that refuses, and a lost
// connection is redialed to the other node while the first stays down.
func TestConnFollowsTheCluster(t *testing.T) {
	target := testenv.AMQPURL(t)
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	a, b := testenv.NewProxy(t, u.Host), testenv.NewProxy(t, u.Host)
	via := func(p *testenv.Proxy) string { v := *u; v.Host = p.Addr(); return v.String() }

	b.Cut()
	conn := dialTest(t, via(b)+","+via(a))
	if _, err := conn.Channel(); err != nil {
		t.Fatalf("the first dial should have skipped the refusing node: %v", err)
	}

	b.Restore()
	a.Cut() // the node in use goes away and stays away
	deadline := time.Now().Add(5 * time.Second)
	for {
		ch, err := conn.Channel()
		if err == nil {
			_ = ch.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connection to the other node within 5s: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
