package app

import (
	"fmt"
	"log/slog"

	"surge/pkg/config"
	"surge/pkg/customertoken"
	"surge/pkg/httpapi"
)

// customerVerifier is the check of customers' tokens that cfg asks for,
// and the func that stops it; nil when customer tokens are off (the
// default), so the order routes take the body's customer_id.
func customerVerifier(cfg config.CustomerAuth, log *slog.Logger) (httpapi.CustomerVerifier, func(), error) {
	if !cfg.Enabled() {
		return nil, func() {}, nil
	}
	v, err := customertoken.New(customertoken.Options{
		Secret:   []byte(cfg.JWTSecret),
		JWKSURL:  cfg.JWKSURL,
		Refresh:  cfg.JWKSRefresh,
		Audience: cfg.Audience,
		Issuer:   cfg.Issuer,
		OnRefreshError: func(url string, err error) {
			log.Error("fetch the customer tokens' key set", "url", url, "err", err)
		},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("customer tokens: %w", err)
	}
	how := "HS256 secret"
	if cfg.JWKSURL != "" {
		how = "key set " + cfg.JWKSURL
	}
	log.Info("orders need a customer token", "keys", how, "audience", cfg.Audience)
	return v, v.Close, nil
}
