package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The sentinel errors. Every error a Store returns that one of them
// describes matches it with errors.Is; the driver's error stays reachable
// with errors.As (a *pgconn.PgError, say) and its text is the error's text.
// Derived sentinels match their parent too: an ErrConflict is an
// ErrConstraint.
var (
	// ErrNotFound: the statement found no row (pgx.ErrNoRows).
	ErrNotFound = errors.New("store: not found")

	// ErrConstraint: a change broke a constraint (SQLSTATE class 23).
	ErrConstraint = errors.New("store: constraint violation")
	// ErrConflict: a row with the same unique key exists (23505).
	ErrConflict = fmt.Errorf("%w: unique key taken", ErrConstraint)
	// ErrCheckViolation: a value broke a CHECK constraint (23514), such as
	// tenants_id_format.
	ErrCheckViolation = fmt.Errorf("%w: check constraint", ErrConstraint)

	// ErrInvalidValue: a value the statement was given or computed is not
	// of its type's form (SQLSTATE class 22).
	ErrInvalidValue = errors.New("store: invalid value")
	// ErrMalformedValue: text that cannot be read as what it claims —
	// not UTF-8 (22021), not of the type's syntax, such as JSON (22P02), a
	// date that does not exist (22008), a character the type cannot hold,
	// such as U+0000 in jsonb (22P05).
	ErrMalformedValue = fmt.Errorf("%w: malformed", ErrInvalidValue)

	// ErrAppendOnly: the statement would change or remove audit history
	// (ORA01, migrations/00001).
	ErrAppendOnly = errors.New("store: the audit log is append-only")
	// ErrAuditEntryInvalid: an audit entry is not a valid orangerail audit
	// record (ORA02, migrations/00001).
	ErrAuditEntryInvalid = errors.New("store: invalid audit entry")
	// ErrRecordMismatch: an approval change carried an audit record that
	// does not describe it (ORA05, migrations/00006).
	ErrRecordMismatch = fmt.Errorf("%w: the record does not describe the approval change", ErrAuditEntryInvalid)
	// ErrTenantMismatch: the transaction names no tenant, or another tenant
	// than the row or record (ORA03, migrations/00001).
	ErrTenantMismatch = errors.New("store: tenant mismatch")
	// ErrLifecycle: a change breaks the approval lifecycle (ORA04,
	// migrations/00001 and 00006).
	ErrLifecycle = errors.New("store: approval lifecycle violated")
	// ErrNotOperator: an operator's record was appended by a login that is
	// neither the orangerail schema's owner nor a superuser (ORA06,
	// migrations/00010).
	ErrNotOperator = errors.New("store: the login is not the database owner")
	// ErrCheckpointMismatch: a checkpoint's tree is not the tree of its
	// tenant's sealed records (ORA07, migrations/00031).
	ErrCheckpointMismatch = errors.New("store: the checkpoint does not describe the chain")
	// ErrBackendBound: a query backend is bound to another query already:
	// the query login's connection is pooled (ORA08, migrations/00051).
	ErrBackendBound = errors.New("store: the query backend is bound to another query")

	// ErrPermission: the role lacks a privilege the statement needs (42501).
	ErrPermission = errors.New("store: permission denied")
	// ErrSchemaMismatch: the statement names a table, column, type, role
	// or function the database lacks, or is not SQL it can parse (SQLSTATE
	// class 42, but 42501).
	ErrSchemaMismatch = errors.New("store: schema mismatch")

	// ErrSerialization: the transaction lost a serialization race or a
	// deadlock (40001, 40P01); running it again may succeed.
	ErrSerialization = errors.New("store: serialization failure")

	// ErrTimeout: a wait ran out of time.
	ErrTimeout = errors.New("store: timed out")
	// ErrStatementTimeout: the server cancelled the statement (57014
	// query_canceled: statement_timeout, or a cancel request).
	ErrStatementTimeout = fmt.Errorf("%w: statement cancelled", ErrTimeout)
	// ErrLockNotAvailable: a lock could not be had in time (55P03:
	// lock_timeout, or NOWAIT).
	ErrLockNotAvailable = fmt.Errorf("%w: lock not available", ErrTimeout)
	// ErrDeadline: the caller's context deadline passed.
	ErrDeadline = fmt.Errorf("%w: context deadline", ErrTimeout)
	// ErrCanceled: the caller's context was cancelled.
	ErrCanceled = errors.New("store: cancelled")

	// ErrUnavailable: the server could not be reached or went away
	// (connection failures, SQLSTATE classes 08 and 57 but 57014, and a
	// connection that died under a statement: closed, cut short or reset).
	ErrUnavailable = errors.New("store: database unavailable")
	// ErrLoginRefused: the server refused the login or has no such
	// database (SQLSTATE classes 28 and 3D).
	ErrLoginRefused = errors.New("store: login refused")
)

// The SQLSTATEs orangerail's own schema raises (migrations/00001, 00006,
// 00010 and 00031). They are read here, by code, and nowhere else.
const (
	codeAppendOnly     = "ORA01"
	codeEntryInvalid   = "ORA02"
	codeTenantMismatch = "ORA03"
	codeLifecycle      = "ORA04"
	codeRecordMismatch = "ORA05"
	codeNotOperator    = "ORA06"
	codeCheckpoint     = "ORA07"
	codeBackendBound   = "ORA08"
)

// Error is an error a sentinel describes: it matches the sentinel and
// unwraps to the driver's error, whose text it keeps.
type Error struct {
	// Sentinel is the sentinel the error matches.
	Sentinel error
	// Err is the driver's error.
	Err error
}

func (e *Error) Error() string   { return e.Err.Error() }
func (e *Error) Unwrap() []error { return []error{e.Sentinel, e.Err} }

// InterpretError returns err matched to the sentinel that describes it, or
// err itself when none does (or it was interpreted already). It is the one
// place a driver error — pgx.ErrNoRows, a *pgconn.PgError's SQLSTATE, a
// connection failure, a context's end — is given a meaning. Every Store
// method applies it; code that runs SQL outside the store (the datasource's
// reads and effects) applies it to classify what Postgres said.
func InterpretError(err error) error {
	if err == nil {
		return nil
	}
	var done *Error
	if errors.As(err, &done) {
		return err
	}
	if s := sentinelOf(err); s != nil {
		return &Error{Sentinel: s, Err: err}
	}
	return err
}

// sentinelOf is the table behind InterpretError.
func sentinelOf(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return sentinelOfCode(pgErr.Code)
	}
	var connErr *pgconn.ConnectError
	switch {
	case errors.As(err, &connErr):
		return ErrUnavailable
	case errors.Is(err, pgx.ErrNoRows):
		return ErrNotFound
	case errors.Is(err, context.DeadlineExceeded):
		return ErrDeadline
	case errors.Is(err, context.Canceled):
		return ErrCanceled
	case lostConnection(err):
		return ErrUnavailable
	}
	return nil
}

// lostConnection reports whether err is a connection that died under a
// statement, without a word from the server: pgx found it closed, or the
// socket ended or failed mid-message. A backend that was terminated says
// so first (57P01), when its last words arrive.
func lostConnection(err error) bool {
	var netErr *net.OpError
	return errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.As(err, &netErr)
}

func sentinelOfCode(code string) error {
	switch code {
	case codeAppendOnly:
		return ErrAppendOnly
	case codeEntryInvalid:
		return ErrAuditEntryInvalid
	case codeTenantMismatch:
		return ErrTenantMismatch
	case codeLifecycle:
		return ErrLifecycle
	case codeRecordMismatch:
		return ErrRecordMismatch
	case codeNotOperator:
		return ErrNotOperator
	case codeCheckpoint:
		return ErrCheckpointMismatch
	case codeBackendBound:
		return ErrBackendBound
	case pgerrcode.UniqueViolation:
		return ErrConflict
	case pgerrcode.CheckViolation:
		return ErrCheckViolation
	case pgerrcode.InvalidTextRepresentation, pgerrcode.CharacterNotInRepertoire,
		pgerrcode.DatetimeFieldOverflow, pgerrcode.UntranslatableCharacter:
		return ErrMalformedValue
	case pgerrcode.InsufficientPrivilege:
		return ErrPermission
	case pgerrcode.SerializationFailure, pgerrcode.DeadlockDetected:
		return ErrSerialization
	case pgerrcode.QueryCanceled:
		return ErrStatementTimeout
	case pgerrcode.LockNotAvailable:
		return ErrLockNotAvailable
	}
	if len(code) < 2 {
		return nil
	}
	switch code[:2] {
	case "23": // integrity constraint violation
		return ErrConstraint
	case "22": // data exception
		return ErrInvalidValue
	case "42": // syntax error or access rule violation
		return ErrSchemaMismatch
	case "08", "57": // connection exception, operator intervention
		return ErrUnavailable
	case "28", "3D": // invalid authorization specification, invalid catalog name
		return ErrLoginRefused
	}
	return nil
}
