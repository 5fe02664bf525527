package order_test

import (
	"strings"
	"testing"

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
