package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"net"

	"github.com/go-sql-driver/mysql"
)

// MySQL server error numbers the store reacts to.
const (
	errDupEntry         = 1062
	errLockWaitTimeout  = 1205
	errDeadlock         = 1213
	errTooManyConns     = 1040
	errServerShutdown   = 1053
	errReadOnly         = 1290
	errConnectionKilled = 1927 // MariaDB
)

// IsTransient reports whether err is worth retrying unchanged: a deadlock
// or lock wait timeout (the transaction was rolled back), a lost or refused
// connection, a server going down or read-only during a failover, or the
// caller's deadline. Domain errors (sold out, unknown SKU, stale fence) and
// cancellations are not transient.
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case errLockWaitTimeout, errDeadlock, errTooManyConns, errServerShutdown,
			errReadOnly, errConnectionKilled:
			return true
		}
		return false
	}
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, driver.ErrBadConn),
		errors.Is(err, mysql.ErrInvalidConn),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.As(err, &ne):
		return true
	}
	return false
}

// isDuplicateKey reports a unique-key violation: a concurrent twin inserted
// the same order first.
func isDuplicateKey(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == errDupEntry
}
