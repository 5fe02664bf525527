package worker

import (
	"errors"

	"surge/pkg/order"
)

// permanent tells whether a processing error will fail the same way on
// every retry, and the dead-letter reason to park it with. Unknown SKUs
// and stale fences are handled before; an order the store finds invalid
// is malformed.
//
// Everything else is transient: MySQL or Redis unreachable or timing out,
// deadlocks, a busy lock, and also MySQL refusing a value. The worker
// writes orders in batched transactions (store.Batcher), where a refused
// value fails the whole batch, so that error cannot be pinned on one
// order: parking it at once would park every order of the batch. Retried,
// the innocent orders succeed in other batches, and the guilty one is
// parked as retries_exhausted with MySQL's message as its last error.
func permanent(err error) (reason string, ok bool) {
	if errors.Is(err, order.ErrInvalid) {
		return order.ReasonMalformed, true
	}
	return "", false
}
