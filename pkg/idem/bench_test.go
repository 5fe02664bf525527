package idem

import (
	"testing"
	"time"
)

// BenchmarkClaimKeys is the gateway's own work to name a claim's order
// ids and keys (hashes and allocations), without Redis.
func BenchmarkClaimKeys(b *testing.B) {
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		_, _, ids, ks := claimKeys("customer-1234567", "key-0123456789", now, 24*time.Hour)
		if len(ids) != 4 || len(ks) != 5 {
			b.Fatal(len(ids), len(ks))
		}
	}
}
