// Package customertoken verifies the tokens a shop gives its customers,
// so that the gateway takes orders only from customers the shop vouches
// for. A token is a JWT: signed with HS256 by a secret the shop shares
// (the shop signs it itself), or with RS256 or ES256 by a key of the
// shop's identity provider, published as a JSON Web Key Set that is
// fetched, cached and refreshed. Its subject (sub) is the customer id.
//
// The algorithms are pinned to the kind of key: a secret takes HS256 only
// and a key set RS256 and ES256 only, so a token cannot pick how it is
// checked (an HS256 token "signed" with a public key, or alg none, is
// refused whatever its claims). exp is required, nbf and aud checked, and
// iss when one is configured.
//
// Parsing and signatures are github.com/golang-jwt/jwt/v5's; the key set
// is read with github.com/MicahParks/jwkset and looked up with
// github.com/MicahParks/keyfunc/v3. Fetching it is this package's (keyset.go):
// at start, on an interval, and when a token names a key it does not hold,
// with a budget that anyone's tokens cannot spend to shut a rotation out.
package customertoken

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"surge/pkg/order"
)

// ErrInvalid is wrapped by every refusal of a token: malformed, signed
// by another key or algorithm, expired, not yet valid, for another
// audience or issuer, or whose subject is no customer id.
var ErrInvalid = errors.New("invalid customer token")

// ErrKeysUnavailable is returned for a token the gateway cannot check
// because the identity provider's key set could not be fetched (the last
// fetch failed, and the token names a key the gateway does not hold): the
// token may be good, so it is not called invalid; the request may be
// retried. It wraps order.ErrUnavailable, which the gateway answers 503
// unavailable (not taken, retry).
var ErrKeysUnavailable = fmt.Errorf("the identity provider's keys cannot be fetched: %w", order.ErrUnavailable)

// ErrKeyNotFetchedYet is returned for a token naming a key the set did not
// hold when it was last fetched, less than MinFetchInterval ago, and that
// no fetch has been asked about since the token came: the key may have
// been published since (a rotation), or never (a made-up key id), and only
// the next fetch can tell. It wraps order.ErrUnavailable, inside an
// *order.UnavailableError whose RetryAfter is the time until that fetch
// may be made.
var ErrKeyNotFetchedYet = fmt.Errorf("the token names a key the identity provider's key set did not hold when last fetched: %w", order.ErrUnavailable)

// Leeway is the clock skew tolerated on exp and nbf: the shop's clock
// and the gateway's may differ by a few seconds.
const Leeway = 30 * time.Second

// MinFetchInterval is the shortest time between two fetches of the key set
// that tokens naming a key it does not hold cause. However many such
// tokens come, and from however many clients, the identity provider is
// asked at most once per interval (per gateway), and a key it publishes is
// fetched at most this long after a token names it.
const MinFetchInterval = 5 * time.Second

// fetchTimeout bounds one fetch of the key set, and so the wait of the
// tokens that wait for it.
const fetchTimeout = 5 * time.Second

// Options says how to verify tokens: Secret or JWKSURL, not both.
type Options struct {
	// Secret is the HS256 key.
	Secret []byte
	// JWKSURL is the identity provider's key set (RS256, ES256).
	JWKSURL string
	// Refresh is how often the key set is fetched again; default 1h.
	Refresh time.Duration
	// Audience every token must name (required).
	Audience string
	// Issuer, when set, every token must carry.
	Issuer string
	// Client fetches the key set; default one with a 10 s timeout.
	Client *http.Client
	// OnRefreshError is told each failed fetch of the key set (a log
	// line); default nothing.
	OnRefreshError func(url string, err error)
	// Now is the clock tokens' times and the fetches' interval are read
	// on; default time.Now.
	Now func() time.Time
}

// Verifier checks customer tokens. It is safe for concurrent use.
type Verifier struct {
	parser *jwt.Parser
	keys   func(ctx context.Context) jwt.Keyfunc
	// set is the identity provider's key set; nil with a secret.
	set *keySet
}

// New builds a Verifier. With JWKSURL, it fetches the key set once (a
// failure is told to OnRefreshError, not returned: the gateway starts,
// and the set is fetched again when a token needs it) and keeps it fresh
// until Close.
func New(opts Options) (*Verifier, error) {
	switch {
	case len(opts.Secret) > 0 && opts.JWKSURL != "":
		return nil, errors.New("customer tokens: a secret and a key set URL are both given")
	case len(opts.Secret) == 0 && opts.JWKSURL == "":
		return nil, errors.New("customer tokens: neither a secret nor a key set URL is given")
	case opts.Audience == "":
		return nil, errors.New("customer tokens: no audience given")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	claimOpts := []jwt.ParserOption{jwt.WithAudience(opts.Audience), jwt.WithExpirationRequired(),
		jwt.WithLeeway(Leeway), jwt.WithIssuedAt(), jwt.WithTimeFunc(opts.Now)}
	if opts.Issuer != "" {
		claimOpts = append(claimOpts, jwt.WithIssuer(opts.Issuer))
	}
	v := &Verifier{}
	if len(opts.Secret) > 0 {
		secret := append([]byte(nil), opts.Secret...)
		v.keys = func(context.Context) jwt.Keyfunc { return func(*jwt.Token) (any, error) { return secret, nil } }
		v.parser = jwt.NewParser(append(claimOpts, jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}))...)
		return v, nil
	}
	// A token naming a key the set does not hold may cause a fetch only
	// when it is good in every other respect: anything else is refused at
	// no cost to the identity provider.
	claims := jwt.NewValidator(claimOpts...)
	goodButForItsKey := func(t *jwt.Token) error {
		if err := claims.Validate(t.Claims); err != nil {
			return err
		}
		_, err := subject(t.Claims)
		return err
	}
	set, err := newKeySet(opts, goodButForItsKey)
	if err != nil {
		return nil, err
	}
	v.set, v.keys = set, set.keyfunc
	v.parser = jwt.NewParser(append(claimOpts, jwt.WithValidMethods([]string{
		jwt.SigningMethodRS256.Alg(), jwt.SigningMethodES256.Alg()}))...)
	return v, nil
}

// Verify checks raw (the bearer token, without "Bearer ") and returns the
// customer it names. A token that could not be checked for want of its
// key (the key set cannot be fetched, or the fetch that may find the key
// is not due yet) wraps order.ErrUnavailable, with an
// *order.UnavailableError saying when to retry; every other refusal wraps
// ErrInvalid, its message saying why (for the log).
func (v *Verifier) Verify(ctx context.Context, raw string) (string, error) {
	var claims jwt.RegisteredClaims
	if _, err := v.parser.ParseWithClaims(raw, &claims, v.keys(ctx)); err != nil {
		if errors.Is(err, order.ErrUnavailable) {
			return "", err
		}
		return "", fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return subject(&claims)
}

// subject is the customer the claims name.
func subject(c jwt.Claims) (string, error) {
	sub, err := c.GetSubject()
	switch {
	case err != nil:
		return "", fmt.Errorf("%w: its subject (sub): %w", ErrInvalid, err)
	case sub == "":
		return "", fmt.Errorf("%w: the token has no subject (sub)", ErrInvalid)
	}
	if err := order.ValidateCustomerID(sub); err != nil {
		return "", fmt.Errorf("%w: its subject (sub) cannot be a customer id: %w", ErrInvalid, err)
	}
	return sub, nil
}

// Close stops refreshing the key set.
func (v *Verifier) Close() {
	if v.set != nil {
		v.set.stop()
	}
}
