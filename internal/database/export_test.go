package database

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// CommitStatus is commitStatus of the transaction xid of tenant on the
// server run server (serverStart's text), witnessed by w, for the tests.
func CommitStatus(ctx context.Context, conn TxBeginner, tenant, xid, server string, w Witness) (string, error) {
	return commitStatus(ctx, conn, tenant, origin{xid: xid, server: server}, w)
}

// Confirm is confirm of a COMMIT that failed with err, just sent, in the
// transaction xid of tenant on the server run server, witnessed by w, for
// the tests.
func Confirm(ctx context.Context, conn TxBeginner, tenant, xid, server string, w Witness, err error) error {
	return confirm(ctx, conn, &commitFailed{err: err, origin: origin{xid: xid, server: server}, tenant: tenant, witness: w, sent: time.Now()})
}

// ErrNoVerdict is errNoVerdict, for the tests.
var ErrNoVerdict = errNoVerdict

// KeptDeadline is the deadline c keeps past a statement whose context
// ends (deadlineKeeper), and whether c has a keeper, for the tests.
func KeptDeadline(c *pgconn.PgConn) (time.Time, bool) {
	k, ok := c.CustomData()[deadlineKey].(*deadlineKeeper)
	if !ok {
		return time.Time{}, false
	}
	return k.deadline(), true
}
