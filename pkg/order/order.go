// Package order holds surge's domain: an order, its statuses, the
// validation every entry point applies, and the errors the rest of the
// code maps to HTTP statuses, exit codes and dead-letter reasons.
//
// It imports no infrastructure: Redis, RabbitMQ and MySQL adapters import
// this package, never the reverse.
package order

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// Limits on client-supplied fields. They bound Redis key sizes and MySQL
// column widths, so they are part of the HTTP contract.
const (
	MaxSKULen        = 64
	MaxCustomerLen   = 64
	MaxIdemKeyLen    = 128
	MaxQty           = 1000
	MaxStock         = 1_000_000_000
	MaxNameLen       = 200
	MaxPriceCents    = 1_000_000_000_00
	orderIDHashBytes = 12
	customerTagBytes = 4
)

// Status is where an order stands.
type Status string

// The statuses an order moves through: accepted by the gateway, then
// invoiced or rejected by a worker. Pending is a status read only: the
// order is reserved and the request that reserved it has not answered
// yet, so it may still be taken back (its publish failed) and answered
// not taken; asked again, it reads accepted, invoiced or not found.
const (
	StatusPending  Status = "pending"
	StatusAccepted Status = "accepted"
	StatusInvoiced Status = "invoiced"
	StatusRejected Status = "rejected"
)

// Reasons recorded with a rejected order or a dead letter.
const (
	// ReasonCompensated: MySQL refused an order the gateway had accepted
	// because the product had no unit left there. Redis sold a unit MySQL
	// did not have: a failover lost Redis writes (replication is
	// asynchronous); a restock below open reservations is refused. It is
	// the one way an accepted order ends without an invoice; the worker,
	// the reconciler and the metrics count it.
	ReasonCompensated = "sold_out_after_acceptance"
	// ReasonPurchaseLimit: MySQL refused an order the gateway had
	// accepted because it would take its customer past the SKU's purchase
	// limit (products.max_per_customer) counting the customer's invoiced
	// units: Redis's per-customer count was behind (a failover lost it,
	// or the limit was set mid-sale before the reconciler counted earlier
	// orders). Compensated like ReasonCompensated: rejected, released,
	// counted.
	ReasonPurchaseLimit = "purchase_limit_after_acceptance"
	ReasonUnknownSKU    = "unknown_sku"
	ReasonMalformed     = "malformed"
)

// Order is one customer's request for qty units of one SKU. It is also the
// body of the message the gateway publishes (JSON field names are the
// contract with the queue's other readers).
type Order struct {
	ID         string `json:"order_id"`
	SKU        string `json:"sku"`
	Qty        int    `json:"qty"`
	CustomerID string `json:"customer_id"`
	// AcceptedAtMs is when the gateway reserved the stock (Unix ms).
	AcceptedAtMs int64 `json:"accepted_at_ms,omitempty"`
	// MaxPerCustomer is the purchase limit per customer Redis applied when
	// it reserved the order (0: the SKU had none). MySQL judges the order
	// by it, not by the product's limit when the order reaches MySQL, so
	// that a limit changed after the order was accepted never turns it
	// into a rejection. Nil when the message does not say (a gateway of an
	// earlier version, a reservation made before reservations recorded
	// their limit): MySQL then applies the product's current limit.
	MaxPerCustomer *int `json:"max_per_customer,omitempty"`
}

// Validate checks every field of an order as a client sent it. The error
// names the first offending field; it wraps ErrInvalid.
func (o Order) Validate() error {
	if err := ValidateSKU(o.SKU); err != nil {
		return err
	}
	if o.Qty < 1 || o.Qty > MaxQty {
		return invalid("qty must be an integer between 1 and %d", MaxQty)
	}
	if err := validateToken("customer_id", o.CustomerID, MaxCustomerLen); err != nil {
		return err
	}
	return nil
}

// ValidateMaxPerCustomer checks a purchase limit per customer: nil (keep
// the current one), 0 (no limit) or 1 to MaxStock.
func ValidateMaxPerCustomer(n *int) error {
	if n != nil && (*n < 0 || *n > MaxStock) {
		return invalid("max_per_customer must be an integer between 0 (no limit) and %d", MaxStock)
	}
	return nil
}

// ValidateSKU checks a SKU: 1-64 characters of [A-Za-z0-9._-].
func ValidateSKU(sku string) error {
	return validateToken("sku", sku, MaxSKULen)
}

// ValidateCustomerID checks a customer id: 1-64 characters of
// [A-Za-z0-9._-]. A verified customer token's subject must pass it too,
// since it becomes the order's customer_id.
func ValidateCustomerID(id string) error {
	return validateToken("customer_id", id, MaxCustomerLen)
}

// ValidateIdempotencyKey checks an Idempotency-Key header: 1-128 printable
// ASCII characters.
func ValidateIdempotencyKey(key string) error {
	if key == "" {
		return invalid("Idempotency-Key header is required")
	}
	if len(key) > MaxIdemKeyLen {
		return invalid("Idempotency-Key must be at most %d characters", MaxIdemKeyLen)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return invalid("Idempotency-Key must be printable ASCII")
		}
	}
	return nil
}

// validateToken accepts identifiers made of letters, digits, '.', '_' and
// '-': safe inside Redis keys (no braces, so no hash-tag confusion), log
// lines and URLs.
func validateToken(field, v string, max int) error {
	if v == "" {
		return invalid("%s is required", field)
	}
	if len(v) > max {
		return invalid("%s must be at most %d characters", field, max)
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '.' || c == '_' || c == '-'
		if !ok {
			return invalid("%s may contain only letters, digits, '.', '_' and '-'", field)
		}
	}
	return nil
}

// IDFor derives the order id from the customer, their idempotency key
// and the idempotency window the key was first used in (KeyWindow). Within a
// window the same (customer, key) always names the same order, so every
// layer (reservation, queue, MySQL) deduplicates retries by order id, even
// after a Redis failover lost the idempotency record. A key used again
// after its record expired falls in a later window and names a new order,
// as clients expect of an expired key, instead of an order MySQL already
// holds. The id is "o_", the customer's tag (TagFor) and 16 hex characters
// of sha256(customer, key, window): the tag lets the gateway find the
// order's idempotency record, which lives on the customer's slot, from the
// id alone.
func IDFor(customerID, idemKey string, window int64) string {
	return IDsFor(customerID, idemKey, window, 1)[0]
}

// IDsFor is IDFor for n windows in a row from the first: the customer's
// tag is hashed once (a claim looks at the key's ids in four windows).
func IDsFor(customerID, idemKey string, first int64, n int) []string {
	const idLen = 2 + 2*orderIDHashBytes
	// All ids share one string; the hash input is built in place on the
	// stack (ids, customers and keys are bounded, see the limits above).
	out := make([]byte, n*idLen)
	var tag [customerTagBytes]byte
	tagOf(&tag, customerID)
	var arr [2*MaxCustomerLen + MaxIdemKeyLen + 24]byte
	in := append(append(append(append(arr[:0], customerID...), 0), idemKey...), 0)
	base := len(in)
	for i := range n {
		id := out[i*idLen : (i+1)*idLen]
		id[0], id[1] = 'o', '_'
		hex.Encode(id[2:], tag[:])
		in = strconv.AppendInt(in[:base], first+int64(i), 10)
		h := sha256.Sum256(in)
		hex.Encode(id[2+2*customerTagBytes:], h[:orderIDHashBytes-customerTagBytes])
	}
	all := string(out)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = all[i*idLen : (i+1)*idLen]
	}
	return ids
}

// Nonce returns 8 random hex characters: enough to tell apart the
// requests that write for one order id (a claim's record, a reservation),
// which is all a nonce is compared against.
func Nonce() string {
	return strconv.FormatUint(uint64(rand.Uint32())|1<<32, 16)[1:]
}

// Window numbers the windows of length ttl (at least 1ms) that begin at
// the Unix epoch: the one holding t. An order id's window is its key's
// (KeyWindow): this one, shifted by the key's phase. A record created at
// t expires before the window after next begins, so at any moment a live
// record belongs to the current window or a neighbour.
func Window(t time.Time, ttl time.Duration) int64 {
	return t.UnixMilli() / max(ttl.Milliseconds(), 1)
}

// KeyWindow numbers the idempotency windows of one (customer, key): the
// one holding t, its windows shifted by the pair's own phase (Phase). Were
// every key's windows to begin at the same instant (00:00 UTC with 24h
// windows), a failover that lost the records of the keys used just before
// it would make every retry of theirs after it name a new order at once;
// shifted, only the keys whose own boundary falls between a first request
// and its retry do, a share of them as small as the retry's delay is
// against the window.
func KeyWindow(customerID, idemKey string, t time.Time, ttl time.Duration) int64 {
	return Window(t.Add(Phase(customerID, idemKey, ttl)), ttl)
}

// Phase is how far (customer, key)'s windows are shifted: a hash of the
// pair, from 0 to ttl (whole milliseconds). The scripts that decide the
// window by the master's clock add it to that clock (lua/admit.lua).
func Phase(customerID, idemKey string, ttl time.Duration) time.Duration {
	var arr [2*MaxCustomerLen + MaxIdemKeyLen + 8]byte
	h := sha256.Sum256(append(append(append(append(arr[:0], "phase\x00"...), customerID...), 0), idemKey...))
	ms := uint64(max(ttl.Milliseconds(), 1))
	return time.Duration(binary.BigEndian.Uint64(h[:8])%ms) * time.Millisecond
}

// TagFor is the customer's tag: the first 8 hex characters of
// sha256(customer id). The customer's gateway state (rate budget,
// idempotency records) shares the hash tag {cust:TAG}.
func TagFor(customerID string) string {
	var tag [customerTagBytes]byte
	tagOf(&tag, customerID)
	return hex.EncodeToString(tag[:])
}

// tagOf puts the first bytes of sha256(customer id) in tag.
func tagOf(tag *[customerTagBytes]byte, customerID string) {
	var arr [2 * MaxCustomerLen]byte
	h := sha256.Sum256(append(arr[:0], customerID...))
	copy(tag[:], h[:])
}

// CustomerTag is the tag (TagFor) of the customer an id produced by IDFor
// belongs to; it is "" for an id too short to carry one.
func CustomerTag(id string) string {
	if len(id) < 2+2*customerTagBytes {
		return ""
	}
	return id[2 : 2+2*customerTagBytes]
}

// ValidateID checks an order id as produced by IDFor.
func ValidateID(id string) error {
	if len(id) != 2+2*orderIDHashBytes || !strings.HasPrefix(id, "o_") {
		return invalid("order id is malformed")
	}
	if _, err := hex.DecodeString(id[2:]); err != nil {
		return invalid("order id is malformed")
	}
	return nil
}

// Fingerprint identifies the body of a request so that a reused
// idempotency key with a different body can be told apart (422).
func (o Order) Fingerprint() string {
	return o.SKU + "|" + strconv.Itoa(o.Qty) + "|" + o.CustomerID
}

// Claim is the idempotency record a request holds for its order.
type Claim struct {
	// OrderID is the order the request's key names.
	OrderID string
	// Created is true when this request made the record (a new order);
	// false for a retry. Only the request that made it may take the
	// record back, when its order was certainly not taken.
	Created bool
	// Nonce identifies the request in the record.
	Nonce string
}
