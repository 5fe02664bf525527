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
// is github.com/MicahParks/keyfunc/v3's (on jwkset), which fetches it
// again on its interval and when a token names a key it does not hold.
package customertoken

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"

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

// Leeway is the clock skew tolerated on exp and nbf: the shop's clock
// and the gateway's may differ by a few seconds.
const Leeway = 30 * time.Second

// unknownKeyRefresh is the shortest time between two fetches of the key
// set caused by tokens naming a key it does not hold: a rotation is
// picked up at once, while tokens with made-up key ids cannot make the
// gateway hammer the identity provider.
const unknownKeyRefresh = time.Minute

// unknownKeyWait bounds the fetch of the key set a token naming an
// unknown key causes.
const unknownKeyWait = 5 * time.Second

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
}

// Verifier checks customer tokens. It is safe for concurrent use.
type Verifier struct {
	parser *jwt.Parser
	keys   func(ctx context.Context) jwt.Keyfunc
	stop   context.CancelFunc
	// fetches tells whether the key set's last fetch failed (nil with
	// a secret).
	fetches *fetchState
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
	parserOpts := []jwt.ParserOption{jwt.WithAudience(opts.Audience), jwt.WithExpirationRequired(),
		jwt.WithLeeway(Leeway), jwt.WithIssuedAt()}
	if opts.Issuer != "" {
		parserOpts = append(parserOpts, jwt.WithIssuer(opts.Issuer))
	}
	v := &Verifier{stop: func() {}}
	if len(opts.Secret) > 0 {
		secret := append([]byte(nil), opts.Secret...)
		v.keys = func(context.Context) jwt.Keyfunc { return func(*jwt.Token) (any, error) { return secret, nil } }
		v.parser = jwt.NewParser(append(parserOpts, jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}))...)
		return v, nil
	}
	v.fetches = &fetchState{}
	kf, stop, err := keySet(opts, v.fetches)
	if err != nil {
		return nil, err
	}
	v.keys, v.stop = kf.KeyfuncCtx, stop
	v.parser = jwt.NewParser(append(parserOpts, jwt.WithValidMethods([]string{
		jwt.SigningMethodRS256.Alg(), jwt.SigningMethodES256.Alg()}))...)
	return v, nil
}

// keySet is the key function over the identity provider's key set, and
// the func that stops its refreshing.
func keySet(opts Options, fetches *fetchState) (keyfunc.Keyfunc, context.CancelFunc, error) {
	client := &http.Client{Timeout: 10 * time.Second}
	if opts.Client != nil {
		c := *opts.Client
		client = &c
	}
	client.Transport = fetches.watch(client.Transport)
	refresh := opts.Refresh
	if refresh <= 0 {
		refresh = time.Hour
	}
	ctx, cancel := context.WithCancel(context.Background())
	override := keyfunc.Override{
		Client:            client,
		RefreshInterval:   refresh,
		RefreshUnknownKID: rate.NewLimiter(rate.Every(unknownKeyRefresh), 1),
		// Bounds both the wait for the refresh budget and the fetch it
		// allows. A token naming an unknown key while the budget is spent
		// is refused at once: the limiter does not wait when the next
		// token comes later than this.
		RateLimitWaitMax: unknownKeyWait,
		RefreshErrorHandlerFunc: func(u string) func(context.Context, error) {
			return func(_ context.Context, err error) {
				if opts.OnRefreshError != nil {
					opts.OnRefreshError(u, err)
				}
			}
		},
	}
	k, err := keyfunc.NewDefaultOverrideCtx(ctx, []string{opts.JWKSURL}, override)
	if err != nil {
		cancel()
		return nil, nil, fmt.Errorf("customer tokens: key set %s: %w", opts.JWKSURL, err)
	}
	return k, cancel, nil
}

// Verify checks raw (the bearer token, without "Bearer ") and returns the
// customer it names. A token that could not be checked because the key
// set cannot be fetched wraps ErrKeysUnavailable; every other refusal
// wraps ErrInvalid, its message saying why (for the log).
func (v *Verifier) Verify(ctx context.Context, raw string) (string, error) {
	var claims jwt.RegisteredClaims
	if _, err := v.parser.ParseWithClaims(raw, &claims, v.keys(ctx)); err != nil {
		if errors.Is(err, jwt.ErrTokenUnverifiable) && v.fetches.failing() {
			return "", fmt.Errorf("%w: %w", ErrKeysUnavailable, err)
		}
		return "", fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if claims.Subject == "" {
		return "", fmt.Errorf("%w: the token has no subject (sub)", ErrInvalid)
	}
	if err := order.ValidateCustomerID(claims.Subject); err != nil {
		return "", fmt.Errorf("%w: its subject (sub) cannot be a customer id: %w", ErrInvalid, err)
	}
	return claims.Subject, nil
}

// Close stops refreshing the key set.
func (v *Verifier) Close() { v.stop() }

// fetchState records whether the key set's last fetch failed, so that a
// token whose key cannot be found is told apart from one whose key the
// identity provider could not be asked for.
type fetchState struct{ failed atomic.Bool }

// failing tells whether the last fetch failed; false without a key set.
func (f *fetchState) failing() bool { return f != nil && f.failed.Load() }

// watch wraps next (http.DefaultTransport when nil) to record each
// fetch's outcome: a key set is only had from a 200.
func (f *fetchState) watch(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(r)
		f.failed.Store(err != nil || resp.StatusCode != http.StatusOK)
		return resp, err
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
