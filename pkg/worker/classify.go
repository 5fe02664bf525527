package worker

import (
	"errors"

	"github.com/go-sql-driver/mysql"

	"surge/pkg/order"
)

// ReasonRefused is the dead-letter reason of an order whose data MySQL
// refuses (a value too long or out of range, a constraint): the same
// statement would fail on every retry.
const ReasonRefused = "refused_by_mysql"

// refusedByMySQL are the server errors about one order's values rather
// than about the server, the schema or the connection. Errors that affect
// every order (a missing table, denied access) are not listed: they are
// retried, so a short misdeployment is ridden out by the tiers instead of
// parking a whole sale at once.
var refusedByMySQL = map[uint16]bool{
	1048: true, // column cannot be null
	1264: true, // out of range value
	1265: true, // data truncated
	1292: true, // incorrect value
	1366: true, // incorrect integer or string value
	1406: true, // data too long
	1451: true, // foreign key: row is referenced
	1452: true, // foreign key: no parent row
	3819: true, // check constraint violated (MySQL)
	4025: true, // check constraint violated (MariaDB)
}

// permanent tells whether a processing error will fail the same way on
// every retry, and the dead-letter reason to park it with. Unknown SKUs
// and stale fences are handled before. Everything else (MySQL or Redis
// unreachable or timing out, deadlocks, a busy lock, unexpected errors) is
// transient: retried through the tiers and parked only when they run out,
// so nothing is ever dropped on a guess.
func permanent(err error) (reason string, ok bool) {
	if errors.Is(err, order.ErrInvalid) {
		return order.ReasonMalformed, true
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) && refusedByMySQL[me.Number] {
		return ReasonRefused, true
	}
	return "", false
}
