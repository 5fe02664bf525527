package config

import (
	"errors"
	"fmt"
	"net/url"
	"time"
)

// MinCustomerJWTSecretLen is the shortest HS256 secret accepted, in
// bytes: RFC 7518 (3.2) wants a key at least as long as the hash, 256
// bits, and a shorter one can be found by trying guesses offline against
// any token a customer holds.
const MinCustomerJWTSecretLen = 32

// CustomerAuth makes the gateway take orders only from customers the shop
// vouches for: with a key set, POST /v1/orders needs a JWT the shop's
// identity provider signed (Authorization: Bearer), whose subject is the
// customer, and GET /v1/orders/{id} shows an order only to its customer.
// Without one (the default), customer_id is whatever the body says, as
// in a local run. Embed it: its variables keep the plain SURGE_ prefix.
type CustomerAuth struct {
	// JWTSecret is the HS256 key shared with the shop:
	// SURGE_CUSTOMER_JWT_SECRET (or the file
	// SURGE_CUSTOMER_JWT_SECRET_FILE), at least 32 bytes; default none.
	JWTSecret string `envconfig:"CUSTOMER_JWT_SECRET" secret:"true"`
	// JWKSURL is the identity provider's JSON Web Key Set (RS256 and
	// ES256 keys): SURGE_CUSTOMER_JWKS_URL, https (http only to a
	// loopback host); default none. Setting it and JWTSecret both is
	// refused.
	JWKSURL string `envconfig:"CUSTOMER_JWKS_URL"`
	// JWKSRefresh is how often the key set is fetched again:
	// SURGE_CUSTOMER_JWKS_REFRESH, default 1h, at least 1m. A token
	// naming a key the set does not hold (a rotation, or a made-up key
	// id) also fetches it, at most once per
	// customertoken.MinFetchInterval (5 s), one fetch shared by the
	// tokens that wait for it.
	JWKSRefresh time.Duration `envconfig:"CUSTOMER_JWKS_REFRESH" default:"1h"`
	// Audience is the aud every token must name:
	// SURGE_CUSTOMER_JWT_AUDIENCE, required with a key, so that a token
	// the provider issued for another application is not taken here.
	Audience string `envconfig:"CUSTOMER_JWT_AUDIENCE"`
	// Issuer, when set, is the iss every token must carry:
	// SURGE_CUSTOMER_JWT_ISSUER, default none (not checked).
	Issuer string `envconfig:"CUSTOMER_JWT_ISSUER"`
}

// Enabled tells whether customer tokens are required.
func (c CustomerAuth) Enabled() bool { return c.JWTSecret != "" || c.JWKSURL != "" }

// Validate refuses settings that would verify tokens weakly or ambiguously:
// a short secret, a secret and a key set both, no audience, a key set
// fetched in clear over the network, or settings for tokens while no key
// is set (the operator expected tokens to be checked; silently not
// checking them would let anyone order as anyone).
func (c CustomerAuth) Validate() error {
	if !c.Enabled() {
		if c.Audience != "" || c.Issuer != "" {
			return errors.New("SURGE_CUSTOMER_JWT_AUDIENCE or SURGE_CUSTOMER_JWT_ISSUER is set but no key is: set SURGE_CUSTOMER_JWT_SECRET (HS256) or SURGE_CUSTOMER_JWKS_URL (RS256/ES256) to require customer tokens, or unset them")
		}
		return nil
	}
	if c.JWTSecret != "" && c.JWKSURL != "" {
		return errors.New("SURGE_CUSTOMER_JWT_SECRET and SURGE_CUSTOMER_JWKS_URL are both set: set one (the secret for HS256 tokens the shop signs itself, the URL for its identity provider's RS256/ES256 keys)")
	}
	if c.JWTSecret != "" && len(c.JWTSecret) < MinCustomerJWTSecretLen {
		return fmt.Errorf("SURGE_CUSTOMER_JWT_SECRET has %d bytes, fewer than %d: set a random secret of at least %d bytes, e.g. `openssl rand -hex 32`",
			len(c.JWTSecret), MinCustomerJWTSecretLen, MinCustomerJWTSecretLen)
	}
	if c.JWKSURL != "" {
		if err := checkJWKSURL(c.JWKSURL); err != nil {
			return err
		}
		if c.JWKSRefresh < time.Minute {
			return fmt.Errorf("SURGE_CUSTOMER_JWKS_REFRESH=%v: must be at least 1m (a rotated key is fetched when a token names it)", c.JWKSRefresh)
		}
	}
	if c.Audience == "" {
		return errors.New("SURGE_CUSTOMER_JWT_AUDIENCE is not set: name the audience (aud) the shop's tokens for surge carry, so that a token issued for another application is refused")
	}
	return nil
}

// checkJWKSURL accepts https, and http to a loopback host only: keys
// fetched in clear could be replaced on the way.
func checkJWKSURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("SURGE_CUSTOMER_JWKS_URL=%q: not an absolute URL", raw)
	}
	switch {
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && IsLoopback(u.Hostname()):
		return nil
	}
	return fmt.Errorf("SURGE_CUSTOMER_JWKS_URL=%q: must be https (http only to a loopback host): keys fetched in clear could be replaced on the way", raw)
}
