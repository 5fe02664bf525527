package lock

import (
	"math/rand/v2"
	"time"
)

// Retry decides, after the n-th failed attempt (n >= 1), how long to wait
// before the next one, or that there is none. Implementations hold no
// state, so one value serves any number of concurrent acquisitions.
type Retry interface {
	Next(failed int) (wait time.Duration, again bool)
}

// RetryFunc adapts a function to Retry.
type RetryFunc func(failed int) (time.Duration, bool)

// Next calls f.
func (f RetryFunc) Next(failed int) (time.Duration, bool) { return f(failed) }

// NoRetry makes a single attempt.
func NoRetry() Retry {
	return RetryFunc(func(int) (time.Duration, bool) { return 0, false })
}

// Linear waits every (minus up to a tenth, so that waiters spread out)
// between attempts, for at most attempts retries; attempts <= 0 retries
// until the context ends.
func Linear(every time.Duration, attempts int) Retry {
	return RetryFunc(func(failed int) (time.Duration, bool) {
		if attempts > 0 && failed > attempts {
			return 0, false
		}
		return every - jitter(every/10), true
	})
}

// Exponential doubles the wait from min up to max between attempts, each
// wait drawn uniformly from its upper half ("equal jitter"), so that
// waiters woken by the same release do not collide again; at most attempts
// retries, or until the context ends when attempts <= 0.
func Exponential(min, max time.Duration, attempts int) Retry {
	return RetryFunc(func(failed int) (time.Duration, bool) {
		if attempts > 0 && failed > attempts {
			return 0, false
		}
		d := max
		if failed <= 30 && min<<(failed-1) < max {
			d = min << (failed - 1)
		}
		return d/2 + jitter(d/2), true
	})
}

// jitter returns a random duration in [0, d].
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return rand.N(d + 1)
}
