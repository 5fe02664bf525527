package order

// ProductView is what a buyer is shown of a product: the body of GET
// /v1/products/{sku}.
type ProductView struct {
	SKU        string `json:"sku"`
	Name       string `json:"name"`
	PriceCents int64  `json:"price_cents"`
	// Available is the number of units still sellable.
	Available int `json:"available"`
}
