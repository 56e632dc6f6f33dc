package database

import "context"

// CommitStatus is commitStatus of the transaction xid of the server run
// server (serverStart's text), for the tests.
func CommitStatus(ctx context.Context, conn TxBeginner, xid, server string) (string, error) {
	return commitStatus(ctx, conn, origin{xid: xid, server: server})
}

// ErrNoVerdict is errNoVerdict, for the tests.
var ErrNoVerdict = errNoVerdict
