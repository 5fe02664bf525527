// Package keys builds every Redis key surge uses. Keys of one SKU share the
// hash tag {sku:X}, so a Lua script sees all of them on one master; keys of
// one customer's gateway state (rate budget, idempotency records) share
// {cust:TAG}, TAG being order.TagFor(customer), which every order id carries.
package keys

import "surge/pkg/order"

// Avail is the number of units of sku still sellable.
func Avail(sku string) string { return "{sku:" + sku + "}:avail" }

// Resv is the hash order_id -> "qty:reserved_at_ms" of open reservations.
func Resv(sku string) string { return "{sku:" + sku + "}:resv" }

// Sold is the number of units of sku committed to MySQL.
func Sold(sku string) string { return "{sku:" + sku + "}:sold" }

// Stock is the total stock of sku as last loaded by operations.
func Stock(sku string) string { return "{sku:" + sku + "}:stock" }

// OrderState is the per-order outcome on the SKU's slot: A (reserved),
// P (reserved, and repeated by another request, which may have published
// it), Rn (published again by the reconciler, n times), U (undone by its
// first request, answered not taken; for a minute), S (sold out at the
// gateway), L (refused for the SKU's purchase limit per customer), C
// (committed), X (rejected, released). It makes the reserve, commit and
// release scripts idempotent per order id, and expires with the
// idempotency window.
func OrderState(sku, orderID string) string { return "{sku:" + sku + "}:ord:" + orderID }

// Undone lists, space-separated, the nonces of the reserve calls for an
// order that the gateway undid (lua/release.lua mode undo): the reserve
// script refuses a call carrying one of them, so a copy of an undone call
// that reaches Redis late (TCP retransmits it, go-redis resends it) never
// reserves. It lives as long as the order state's idempotency window.
func Undone(sku, orderID string) string { return "{sku:" + sku + "}:undone:" + orderID }

// MaxPerCustomer is the purchase limit of sku: the most units one customer
// may hold accepted or reserved. Missing or 0: no limit.
func MaxPerCustomer(sku string) string { return "{sku:" + sku + "}:max" }

// CustomerUnits counts the units of sku one customer holds reserved or
// committed, counted only while the SKU has a limit (MaxPerCustomer): a
// reservation made under a limit is marked counted, and only a counted one
// gives its units back when released. It carries no TTL, like the stock
// keys, and shares the SKU's hash tag.
func CustomerUnits(sku, customerID string) string { return "{sku:" + sku + "}:cust:" + customerID }

// SKUPattern matches the stock keys of every SKU, for SCAN on each master.
const SKUPattern = "{sku:*}:stock"

// SKUFromStockKey extracts the SKU from a key matched by SKUPattern; ok is
// false for any other key.
func SKUFromStockKey(key string) (sku string, ok bool) {
	const prefix, suffix = "{sku:", "}:stock"
	if len(key) <= len(prefix)+len(suffix) || key[:len(prefix)] != prefix || key[len(key)-len(suffix):] != suffix {
		return "", false
	}
	return key[len(prefix) : len(key)-len(suffix)], true
}

// Idem is the idempotency record of one order: the fingerprint of the
// request that created it. It also lets GET /v1/orders/{id} find the SKU.
// It lives on the slot of the order's customer (order.CustomerTag), beside
// CustomerRate, so one script limits and claims.
func Idem(orderID string) string {
	return "{cust:" + order.CustomerTag(orderID) + "}:idem:" + orderID
}

// CustomerRate is the rate budget of one customer on POST /v1/orders. The
// customer id follows the tag: two customers sharing a tag keep their own
// budgets.
func CustomerRate(customerID string) string {
	return "{cust:" + order.TagFor(customerID) + "}:rl:" + customerID
}

// CustomerRateOf is CustomerRate for a customer whose order id (IDFor)
// is at hand: the tag is read from the id instead of hashed again.
func CustomerRateOf(orderID, customerID string) string {
	return "{cust:" + order.CustomerTag(orderID) + "}:rl:" + customerID
}

// Lock is the lease key of a distributed lock on name.
func Lock(name string) string { return "{lock:" + name + "}" }

// LockFence is the counter that backs a lock's fencing tokens in Redis.
func LockFence(name string) string { return "{lock:" + name + "}:fence" }

// SKUTag is the hash tag of sku's keys: locks grouped under it (a
// worker's order locks) live on the SKU's slot, beside its stock.
func SKUTag(sku string) string { return "sku:" + sku }

// TaggedLock is the lease key of lock name taken under hash tag tag
// (pkg/lock's Group), on tag's slot.
func TaggedLock(tag, name string) string { return "{" + tag + "}:lock:" + name }

// TagFence is the counter that backs the fencing tokens of every lock
// taken under hash tag tag.
func TagFence(tag string) string { return "{" + tag + "}:lockfence" }

// Cache is the entry of id in the cache namespace ns: a hash holding the
// value and its expiry metadata (pkg/cache).
func Cache(ns, id string) string { return "{cache:" + ns + ":" + id + "}" }

// CacheLease is the rebuild lease of a cache entry; it shares the entry's
// hash tag so one script reads the entry and takes the lease.
func CacheLease(ns, id string) string { return Cache(ns, id) + ":lease" }

// ProductNamespace is the cache namespace of product views.
const ProductNamespace = "product"

// Product is the cached product view of sku.
func Product(sku string) string { return Cache(ProductNamespace, sku) }

// ProductLease is the rebuild lease of the cached product view of sku.
func ProductLease(sku string) string { return CacheLease(ProductNamespace, sku) }

// RateLimit is the rate-limit counter of one subject (a client IP; the
// customer limit uses CustomerRate).
func RateLimit(subject string) string { return "{rl:" + subject + "}" }
