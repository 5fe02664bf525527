package customertoken

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"

	"surge/pkg/order"
)

// maxKeySetBytes bounds the key set read from the identity provider: a
// set holds a few keys of about a kilobyte each.
const maxKeySetBytes = 1 << 20

// maxMissedKeyIDs bounds the key ids a fetch remembers not holding.
const maxMissedKeyIDs = 1024

// keySet is the identity provider's JSON Web Key Set as last fetched, and
// the fetching of it.
//
// It is fetched at start, every Options.Refresh, and when a token that is
// good in every other respect names a key id the set does not hold: a
// rotation, or a made-up id, which nothing but a fetch can tell apart.
// Anyone can send such tokens, so those fetches are held to one per
// MinFetchInterval and shared: a token that finds a fetch in flight waits
// for it rather than making another, and decides by it (its key found,
// or the token refused). A flood of made-up key ids therefore costs the
// provider one fetch per interval, and a rotated key is fetched at most
// that long after a customer's token names it, whatever else comes.
//
// A token naming an unknown key in between (the last fetch a token caused
// began less than MinFetchInterval ago) is answered at once, without a
// fetch:
//   - refused when the last fetch was asked for the same key id and did
//     not hold it: an identity provider publishes a key before it signs
//     with it, so the id was not the provider's then; a junk token sent
//     again costs nothing;
//   - otherwise unavailable (not taken, retry) after the time left until
//     the next fetch may be made, not refused: the key may have been
//     published since (a rotation), and a customer whose token is good is
//     not to be told to sign in again.
//
// The sharing is kept here rather than in golang.org/x/sync/singleflight:
// whether a fetch may begin depends on when the last one began, and a
// fetch keeps the key ids it was asked for, both under the same lock.
type keySet struct {
	url     string
	client  *http.Client
	now     func() time.Time
	onError func(url string, err error)
	// goodButForItsKey tells whether a token is good in every respect
	// but its signature: only such a token may cause a fetch.
	goodButForItsKey func(*jwt.Token) error
	store            *jwkset.MemoryJWKSet
	lookup           keyfunc.Keyfunc
	seed             maphash.Seed
	// ctx ends the periodic fetches and any fetch in flight (stop).
	ctx  context.Context
	stop context.CancelFunc

	mu sync.Mutex
	// asked is when the last fetch a token caused began.
	asked time.Time
	// inFlight is the fetch under way; nil when none is.
	inFlight *fetch
	// latest is the last fetch that ended; nil before the first.
	latest *fetch
}

// fetch is one fetch of the key set, shared by the tokens that wait for
// it.
type fetch struct {
	done chan struct{}
	// err is how the fetch failed, nil when it did not; written before
	// done is closed.
	err error
	// missed holds (hashed) the key ids tokens that waited for it asked
	// for and it did not hold; guarded by keySet.mu.
	missed map[uint64]struct{}
}

// newKeySet fetches the key set at opts.JWKSURL once (a failure is told to
// OnRefreshError, not returned) and keeps fetching it every opts.Refresh
// until stop.
func newKeySet(opts Options, goodButForItsKey func(*jwt.Token) error) (*keySet, error) {
	if _, err := url.ParseRequestURI(opts.JWKSURL); err != nil {
		return nil, fmt.Errorf("customer tokens: key set %s: %w", opts.JWKSURL, err)
	}
	client := opts.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	refresh := opts.Refresh
	if refresh <= 0 {
		refresh = time.Hour
	}
	store := jwkset.NewMemoryStorage()
	lookup, err := keyfunc.New(keyfunc.Options{Storage: store})
	if err != nil {
		return nil, fmt.Errorf("customer tokens: key set %s: %w", opts.JWKSURL, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &keySet{url: opts.JWKSURL, client: client, now: opts.Now, onError: opts.OnRefreshError,
		goodButForItsKey: goodButForItsKey, store: store, lookup: lookup, seed: maphash.MakeSeed(),
		ctx: ctx, stop: cancel}
	s.refresh()
	go func() {
		tick := time.NewTicker(refresh)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				s.refresh()
			}
		}
	}()
	return s, nil
}

// keyfunc finds the key a token names, fetching the set when the token
// names a key it does not hold and a fetch is due (see keySet). A token
// that cannot be decided without a fetch that is not due yet, or whose
// fetch failed, gets an *order.UnavailableError.
func (s *keySet) keyfunc(ctx context.Context) jwt.Keyfunc {
	lookup := s.lookup.KeyfuncCtx(ctx)
	return func(t *jwt.Token) (any, error) {
		key, err := lookup(t)
		if set, ok := key.(jwt.VerificationKeySet); ok && len(set.Keys) == 0 && s.failing() {
			// A token without a key id, to be tried against every key of
			// a set that could never be fetched.
			return nil, s.unavailable(errors.New("no key of the set is held"))
		}
		if !errors.Is(err, jwkset.ErrKeyNotFound) {
			return key, err
		}
		if bad := s.goodButForItsKey(t); bad != nil {
			return nil, bad
		}
		kid, _ := t.Header[jwkset.HeaderKID].(string)
		f, wait, missed := s.fetchFor(kid)
		if f == nil {
			// A fetch may have ended between the lookup and fetchFor; its
			// keys are held by now.
			if key, err := lookup(t); !errors.Is(err, jwkset.ErrKeyNotFound) {
				return key, err
			}
			switch failed := s.latestErr(); {
			case missed:
				return nil, err
			case failed != nil:
				return nil, s.unavailable(failed)
			}
			return nil, &order.UnavailableError{Cause: ErrKeyNotFetchedYet, RetryAfter: wait}
		}
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, s.unavailable(ctx.Err())
		}
		if f.err != nil {
			return nil, s.unavailable(f.err)
		}
		key, err = lookup(t)
		if errors.Is(err, jwkset.ErrKeyNotFound) {
			s.remember(f, kid)
		}
		return key, err
	}
}

// fetchFor is the fetch a token naming the unknown key kid is to wait
// for: the one in flight, or a new one when the last a token caused began
// at least MinFetchInterval ago. When neither, it returns nil, the time
// until a fetch may be made, and whether the last fetch was asked for kid
// and did not hold it.
func (s *keySet) fetchFor(kid string) (f *fetch, wait time.Duration, missed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inFlight != nil {
		return s.inFlight, 0, false
	}
	now := s.now()
	if wait := s.asked.Add(MinFetchInterval).Sub(now); wait > 0 {
		if s.latest != nil {
			_, missed = s.latest.missed[maphash.String(s.seed, kid)]
		}
		return nil, wait, missed
	}
	s.asked = now
	return s.startLocked(), 0, false
}

// refresh fetches the set (or waits for the fetch in flight), whether or
// not a token asked for it.
func (s *keySet) refresh() {
	s.mu.Lock()
	f := s.inFlight
	if f == nil {
		f = s.startLocked()
	}
	s.mu.Unlock()
	<-f.done
}

// startLocked starts a fetch; s.mu is held.
func (s *keySet) startLocked() *fetch {
	f := &fetch{done: make(chan struct{}), missed: map[uint64]struct{}{}}
	s.inFlight = f
	go func() {
		f.err = s.get()
		if f.err != nil && s.onError != nil && s.ctx.Err() == nil {
			s.onError(s.url, f.err)
		}
		s.mu.Lock()
		s.inFlight, s.latest = nil, f
		s.mu.Unlock()
		close(f.done)
	}()
	return f
}

// get fetches the set and, when it reads whole, makes its keys the ones
// tokens are checked with (a key the provider no longer publishes is
// forgotten: it may have been revoked).
func (s *keySet) get() error {
	ctx, cancel := context.WithTimeout(s.ctx, fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return fmt.Errorf("fetch the key set: %w", err)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("fetch the key set: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fetch the key set: %s", resp.Status)
	}
	var set jwkset.JWKSMarshal
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxKeySetBytes)).Decode(&set); err != nil {
		return fmt.Errorf("read the key set: %w", err)
	}
	keys := make([]jwkset.JWK, 0, len(set.Keys))
	for _, m := range set.Keys {
		k, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{}, jwkset.JWKValidateOptions{})
		switch {
		case errors.Is(err, jwkset.ErrUnsupportedKey):
			continue // a kind of key no token here is signed with
		case err != nil:
			return fmt.Errorf("read the key set: key %q: %w", m.KID, err)
		}
		keys = append(keys, k)
	}
	return s.store.KeyReplaceAll(ctx, keys)
}

// remember records that f, which a token naming kid waited for, did not
// hold kid.
func (s *keySet) remember(f *fetch, kid string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(f.missed) < maxMissedKeyIDs {
		f.missed[maphash.String(s.seed, kid)] = struct{}{}
	}
}

// failing tells whether the last fetch failed; false without a key set.
func (s *keySet) failing() bool { return s.latestErr() != nil }

// latestErr is how the last fetch failed; nil when it did not, or
// without a key set.
func (s *keySet) latestErr() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.latest == nil {
		return nil
	}
	return s.latest.err
}

// unavailable is the answer to a token that could not be checked because
// the key set could not be fetched: retry once the next fetch may be made.
func (s *keySet) unavailable(cause error) error {
	s.mu.Lock()
	wait := s.asked.Add(MinFetchInterval).Sub(s.now())
	s.mu.Unlock()
	return &order.UnavailableError{Cause: fmt.Errorf("%w: %w", ErrKeysUnavailable, cause), RetryAfter: max(wait, 0)}
}
