package order_test

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"
	"time"

	"surge/pkg/order"
)

func TestIDForCarriesTheCustomerTag(t *testing.T) {
	id := order.IDFor("alice", "k1", 0)
	if len(id) != 26 || !strings.HasPrefix(id, "o_") {
		t.Fatalf("id %q: want o_ and 24 hex characters", id)
	}
	if err := order.ValidateID(id); err != nil {
		t.Fatalf("ValidateID(%q): %v", id, err)
	}
	if id != order.IDFor("alice", "k1", 0) {
		t.Fatal("IDFor is not deterministic")
	}
	if tag := order.CustomerTag(id); tag != order.TagFor("alice") || len(tag) != 8 {
		t.Fatalf("CustomerTag(%q) = %q, want TagFor(alice) = %q", id, tag, order.TagFor("alice"))
	}
	if other := order.IDFor("alice", "k2", 0); other == id || order.CustomerTag(other) != order.CustomerTag(id) {
		t.Fatalf("alice's keys k1, k2 gave %q and %q: want distinct ids with one tag", id, other)
	}
	if order.TagFor("bob") == order.TagFor("alice") {
		t.Fatal("alice and bob share a tag")
	}
	if tag := order.CustomerTag("o_12"); tag != "" {
		t.Fatalf("CustomerTag of a short id = %q, want empty", tag)
	}
}

// TestIDsMatchTheirDerivation: ids, phases and tags are what their doc
// comments derive (they name orders already in MySQL and Redis, so they
// never change), at the field limits too.
func TestIDsMatchTheirDerivation(t *testing.T) {
	long := strings.Repeat("c", order.MaxCustomerLen)
	longKey := strings.Repeat("~", order.MaxIdemKeyLen)
	for _, tc := range []struct{ customer, key string }{{"alice", "k-1"}, {long, longKey}, {"b", ""}} {
		tagSum := sha256.Sum256([]byte(tc.customer))
		tag := hex.EncodeToString(tagSum[:4])
		if got := order.TagFor(tc.customer); got != tag {
			t.Errorf("TagFor(%q) = %s, want %s", tc.customer, got, tag)
		}
		ids := order.IDsFor(tc.customer, tc.key, -1, 4)
		for i, id := range ids {
			h := sha256.Sum256([]byte(tc.customer + "\x00" + tc.key + "\x00" + strconv.Itoa(i-1)))
			if want := "o_" + tag + hex.EncodeToString(h[:8]); id != want {
				t.Errorf("IDsFor(%q, %q)[%d] = %s, want %s", tc.customer, tc.key, i, id, want)
			}
		}
		ph := sha256.Sum256([]byte("phase\x00" + tc.customer + "\x00" + tc.key))
		want := time.Duration(binary.BigEndian.Uint64(ph[:8])%86_400_000) * time.Millisecond
		if got := order.Phase(tc.customer, tc.key, 24*time.Hour); got != want {
			t.Errorf("Phase(%q, %q) = %v, want %v", tc.customer, tc.key, got, want)
		}
	}
}
