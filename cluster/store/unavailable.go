package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrUnavailable marks a store operation that failed because the store
// could not be reached, or dropped the connection, while it ran — a
// restarting or unreachable server rather than a fault of the request. A
// write that failed this way may or may not have been applied.
var ErrUnavailable = errors.New("store: unavailable")

// Unavailable reports whether err means the store was unavailable: err wraps
// [ErrUnavailable], or it is a connection-level failure from the driver
// (connect refused, connection reset or closed mid-statement, the server
// terminating the session for a shutdown or restart). Errors a request
// causes (constraint violations, [ErrFenced], [ErrNotFound], bad SQL) and
// context cancellation are not.
func Unavailable(err error) bool {
	if errors.Is(err, ErrUnavailable) {
		return true // marked by whoever knew (e.g. its own deadline passed), whatever it wraps
	}
	if err == nil || errors.Is(err, ErrFenced) || errors.Is(err, ErrNotFound) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return unavailableSQLState(pgErr.Code)
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) || pgconn.SafeToRetry(err) {
		return true
	}
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// unavailableSQLState reports whether a Postgres error code says the
// server, not the statement, is the problem: connection exceptions (class
// 08), admin/crash shutdown and "cannot connect now" (57P01–57P03, sent
// while it restarts), and too many connections (53300).
func unavailableSQLState(code string) bool {
	switch code {
	case "57P01", "57P02", "57P03", "53300":
		return true
	}
	return len(code) == 5 && code[:2] == "08"
}

// ThroughOutage runs an idempotent store operation, retrying it with
// backoff (20 ms doubling to 500 ms) while it fails because the store is
// [Unavailable], until ctx ends; then it returns the last error. Only for
// operations that are safe to repeat (upserts, reads): a failed attempt
// may have been applied. ctx's deadline is the operation's own (how long
// an outage is ridden out): an attempt still failing or unanswered when it
// passes is reported as [ErrUnavailable], not as a plain deadline error.
func ThroughOutage(ctx context.Context, op func() error) error {
	backoff := 20 * time.Millisecond
	for {
		err := op()
		if err != nil && !Unavailable(err) && !errors.Is(err, ErrFenced) && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("%w: no answer before the deadline: %w", ErrUnavailable, err)
		}
		if err == nil || !Unavailable(err) {
			return err
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return err // already Unavailable
		case <-t.C:
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}
