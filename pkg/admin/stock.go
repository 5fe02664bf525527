package admin

import (
	"time"

	"surge/pkg/order"
)

// LoadRequest is a stock load: the total stock and optional product fields.
// MaxPerCustomer is the purchase limit per customer: absent keeps the
// current one (none for a new product), 0 removes it.
type LoadRequest struct {
	Stock          *int    `json:"stock"`
	Name           *string `json:"name,omitempty"`
	PriceCents     *int64  `json:"price_cents,omitempty"`
	MaxPerCustomer *int    `json:"max_per_customer,omitempty"`
}

// Validate checks a load request.
func (r LoadRequest) Validate() error {
	if r.Stock == nil {
		return order.Invalid("stock is required")
	}
	if *r.Stock < 0 || *r.Stock > order.MaxStock {
		return order.Invalid("stock must be an integer between 0 and %d", order.MaxStock)
	}
	if r.Name != nil && len(*r.Name) > order.MaxNameLen {
		return order.Invalid("name must be at most %d characters", order.MaxNameLen)
	}
	if r.PriceCents != nil && (*r.PriceCents < 0 || *r.PriceCents > order.MaxPriceCents) {
		return order.Invalid("price_cents must be between 0 and %d", int64(order.MaxPriceCents))
	}
	return order.ValidateMaxPerCustomer(r.MaxPerCustomer)
}

// StockReport shows one SKU in MySQL (the truth) and Redis side by side.
type StockReport struct {
	SKU string `json:"sku"`
	// MySQL is nil when MySQL has no such product.
	MySQL *Product   `json:"mysql"`
	Redis RedisStock `json:"redis"`
	// Consistent is true when Redis holds the same stock and sold as MySQL
	// and avail + reserved + sold == stock.
	Consistent bool `json:"consistent"`
}

// Product is a product as MySQL records it.
type Product struct {
	SKU        string `json:"sku"`
	Name       string `json:"name"`
	PriceCents int64  `json:"price_cents"`
	Stock      int    `json:"stock"`
	Sold       int    `json:"sold"`
	// MaxPerCustomer is the purchase limit per customer (0: none).
	MaxPerCustomer int `json:"max_per_customer"`
}

// RedisStock is one consistent snapshot of a SKU's stock keys in Redis.
type RedisStock struct {
	SKU string `json:"sku"`
	// Loaded is false when Redis holds no stock for the SKU.
	Loaded   bool `json:"loaded"`
	Stock    int  `json:"stock"`
	Avail    int  `json:"avail"`
	Sold     int  `json:"sold"`
	Reserved int  `json:"reserved"`
	// MaxPerCustomer is the purchase limit per customer Redis enforces
	// (0: none).
	MaxPerCustomer int `json:"max_per_customer"`
	// Reservations maps order id to its open reservation.
	Reservations map[string]Reservation `json:"reservations,omitempty"`
}

// Reservation is one open reservation in Redis.
type Reservation struct {
	Qty        int       `json:"qty"`
	ReservedAt time.Time `json:"reserved_at"`
	// CustomerID is the order's customer ("" for a reservation made
	// before it was recorded).
	CustomerID string `json:"customer_id,omitempty"`
}
