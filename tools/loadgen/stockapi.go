package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"surge/pkg/admin"
)

// StockAPI talks to the admin stock routes (PUT and GET
// /v1/admin/stock/{sku}).
type StockAPI struct {
	Client  *http.Client
	BaseURL string
	// Token is the admin bearer token (SURGE_ADMIN_TOKEN).
	Token string
}

// Load sets sku's stock, creating the product when missing, and its
// purchase limit per customer when maxPerCustomer > 0 (else the product
// keeps its limit).
func (a StockAPI) Load(ctx context.Context, sku string, stock int, priceCents int64, maxPerCustomer int) error {
	req := admin.LoadRequest{Stock: &stock, PriceCents: &priceCents}
	if maxPerCustomer > 0 {
		req.MaxPerCustomer = &maxPerCustomer
	}
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encode stock load: %w", err)
	}
	if err := a.do(ctx, http.MethodPut, sku, body, nil); err != nil {
		return fmt.Errorf("load stock sku=%s: %w", sku, err)
	}
	return nil
}

// View returns the Redis and MySQL views of sku side by side.
func (a StockAPI) View(ctx context.Context, sku string) (admin.StockReport, error) {
	var rep admin.StockReport
	if err := a.do(ctx, http.MethodGet, sku, nil, &rep); err != nil {
		return admin.StockReport{}, fmt.Errorf("show stock sku=%s: %w", sku, err)
	}
	return rep, nil
}

func (a StockAPI) do(ctx context.Context, method, sku string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, a.BaseURL+"/v1/admin/stock/"+url.PathEscape(sku), bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+a.Token)
	resp, err := a.Client.Do(req)
	if err != nil {
		return fmt.Errorf("%s stock: %w", method, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("read answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s stock: status %d: %s", method, resp.StatusCode, bytes.TrimSpace(raw))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("decode answer: %w", err)
	}
	return nil
}
