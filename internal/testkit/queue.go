package testkit

import (
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"surge/pkg/queue"
)

// OnChannel runs fn on a fresh channel of conn (declaring, binding or
// deleting test topology), failing the test on any error.
func OnChannel(t testing.TB, conn *queue.Conn, fn func(*amqp.Channel) error) {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := fn(ch); err != nil {
		t.Fatal(err)
	}
}
