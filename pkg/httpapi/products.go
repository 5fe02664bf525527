package httpapi

import (
	"context"
	"net/http"

	"surge/pkg/order"
)

// ProductReader answers product views, from a cache in production. It
// returns errors wrapping order.ErrUnknownSKU for products that do not
// exist and order.ErrUnavailable when it cannot answer now.
type ProductReader interface {
	Product(ctx context.Context, sku string) (order.ProductView, error)
}

// Products returns the handler of GET /v1/products/{sku}; mount it with
// Handle after Handler.
func (s *Server) Products(p ProductReader) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sku := r.PathValue("sku")
		if err := order.ValidateSKU(sku); err != nil {
			s.writeError(w, r, err)
			return
		}
		v, err := p.Product(r.Context(), sku)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, v)
	}
}
