// Package reqid carries a request's id through a context, so every log
// line about the request (the HTTP layer's, the gateway's with the order
// id) can name it.
package reqid

import (
	"context"
	"encoding/binary"
	"math/rand/v2"

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

// New makes an id: a ULID (time-ordered, 26 characters). Its random part
// comes from math/rand/v2's per-thread generator, not ulid's default
// source, whose lock every request would take: an id needs to be unique,
// not secret.
func New() string { return ulid.MustNew(ulid.Now(), fastRand{}).String() }

// fastRand reads math/rand/v2's generator as an io.Reader.
type fastRand struct{}

func (fastRand) Read(p []byte) (int, error) {
	for i := 0; i < len(p); i += 8 {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], rand.Uint64())
		copy(p[i:], b[:])
	}
	return len(p), nil
}
