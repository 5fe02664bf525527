package store

import (
	"context"
	"database/sql/driver"
	"fmt"
	"net"
	"testing"

	"github.com/go-sql-driver/mysql"

	"surge/pkg/order"
)

func TestIsTransient(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("process order o-1: %w", err) }
	cases := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{wrap(&mysql.MySQLError{Number: 1213, Message: "Deadlock found"}), true},
		{wrap(&mysql.MySQLError{Number: 1205, Message: "Lock wait timeout exceeded"}), true},
		{wrap(&mysql.MySQLError{Number: 1062, Message: "Duplicate entry"}), false},
		{wrap(&mysql.MySQLError{Number: 1146, Message: "Table doesn't exist"}), false},
		{wrap(driver.ErrBadConn), true},
		{wrap(mysql.ErrInvalidConn), true},
		{wrap(&net.OpError{Op: "dial", Err: fmt.Errorf("connection refused")}), true},
		{wrap(context.DeadlineExceeded), true},
		{wrap(context.Canceled), false},
		{wrap(order.ErrSoldOut), false},
		{wrap(order.ErrStaleFence), false},
		{wrap(order.ErrUnknownSKU), false},
	}
	for _, c := range cases {
		if got := IsTransient(c.err); got != c.want {
			t.Errorf("IsTransient(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
