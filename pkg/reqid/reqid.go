// Package reqid carries a request's id through a context, so every log
// line about the request (the HTTP layer's, the gateway's with the order
// id) can name it.
package reqid

import (
	"context"

	"github.com/oklog/ulid/v2"
)

type key struct{}

// MaxLen bounds an id taken from a client.
const MaxLen = 128

// With returns ctx carrying id.
func With(ctx context.Context, id string) context.Context { return context.WithValue(ctx, key{}, id) }

// From returns the id ctx carries, "" when none.
func From(ctx context.Context) string {
	id, _ := ctx.Value(key{}).(string)
	return id
}

// Valid tells whether a client's id may be used as it is: 1 to MaxLen of
// [A-Za-z0-9._:-], safe in logs and headers.
func Valid(id string) bool {
	if id == "" || len(id) > MaxLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '.' || c == '_' || c == ':' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}

// New makes an id: a ULID (time-ordered, 26 characters).
func New() string { return ulid.Make().String() }
