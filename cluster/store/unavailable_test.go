package store_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/internal/testenv"
)

func TestUnavailableClassifiesConnectionFailuresOnly(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("store: save grain probe/x: %w", err) }
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"marked", wrap(store.ErrUnavailable), true},
		{"fenced", wrap(store.ErrFenced), false},
		{"not found", wrap(store.ErrNotFound), false},
		{"bad conn (database/sql gave up retrying)", wrap(driver.ErrBadConn), true},
		{"conn done", wrap(sql.ErrConnDone), true},
		{"admin shutdown", wrap(&pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"}), true},
		{"crash shutdown", wrap(&pgconn.PgError{Code: "57P02"}), true},
		{"cannot connect now", wrap(&pgconn.PgError{Code: "57P03", Message: "the database system is starting up"}), true},
		{"too many connections", wrap(&pgconn.PgError{Code: "53300"}), true},
		{"connection failure class 08", wrap(&pgconn.PgError{Code: "08006"}), true},
		{"unique violation", wrap(&pgconn.PgError{Code: "23505"}), false},
		{"syntax error", wrap(&pgconn.PgError{Code: "42601"}), false},
		{"query canceled", wrap(&pgconn.PgError{Code: "57014"}), false},
		{"reset mid-statement", wrap(&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}), true},
		{"refused", wrap(syscall.ECONNREFUSED), true},
		{"broken pipe", wrap(syscall.EPIPE), true},
		{"unexpected EOF", wrap(io.ErrUnexpectedEOF), true},
		{"caller cancelled", wrap(context.Canceled), false},
		{"caller deadline", wrap(context.DeadlineExceeded), false},
		// An own deadline marked as an outage (the activation's I/O timeout,
		// the journal's write deadline): the mark wins over the deadline it
		// wraps. Before, the deadline check came first and hid the mark.
		{"own deadline, marked", fmt.Errorf("%w: no answer within 5s: %w", store.ErrUnavailable, context.DeadlineExceeded), true},
		{"other", wrap(errors.New("decode record: bad wire type")), false},
		{"no rows", wrap(sql.ErrNoRows), false},
	}
	for _, c := range cases {
		if got := store.Unavailable(c.err); got != c.want {
			t.Errorf("%s: Unavailable(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

// The driver's own errors, produced for real: nothing listening, and a
// server that terminates the session mid-statement (what a Postgres
// restart does to every connection).
func TestUnavailableRecognisesRealDriverErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	port := testenv.FreePort(t)
	_, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/test?connect_timeout=2", port))
	if err == nil || !store.Unavailable(err) {
		t.Fatalf("connect to a closed port: %v, want unavailable", err)
	}

	dsn := testenv.Postgres(t)
	victim, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer victim.Close(context.Background())
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	var pid int
	if err := victim.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := victim.Exec(ctx, "SELECT pg_sleep(30)")
		done <- err
	}()
	waitBackendState(t, admin, pid, "active")
	if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	err = <-done
	if !store.Unavailable(err) {
		t.Fatalf("statement of a terminated session: %v, want unavailable", err)
	}
	if _, err := victim.Exec(ctx, "SELECT 1"); !store.Unavailable(err) {
		t.Fatalf("next statement on the dead connection: %v, want unavailable", err)
	}
}

// waitBackendState waits until backend pid is in state (pg_stat_activity).
func waitBackendState(t *testing.T, admin *pgx.Conn, pid int, state string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var got string
		err := admin.QueryRow(context.Background(), "SELECT coalesce(state, '') FROM pg_stat_activity WHERE pid = $1", pid).Scan(&got)
		if err == nil && got == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("backend %d never reached state %q (last %q, %v)", pid, state, got, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ThroughOutage's deadline is the operation's own: an attempt unanswered
// when it passes (a hung store) is an outage, not a plain deadline error;
// an attempt that fails for another reason keeps its error.
func TestThroughOutageReportsItsDeadlineAsAnOutage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := store.ThroughOutage(ctx, func() error {
		<-ctx.Done()
		return fmt.Errorf("store: ping: %w", ctx.Err())
	})
	if !store.Unavailable(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hung store: %v, want an outage wrapping the deadline", err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), time.Hour)
	defer cancel2()
	if err := store.ThroughOutage(ctx2, func() error { return store.ErrFenced }); !errors.Is(err, store.ErrFenced) || store.Unavailable(err) {
		t.Fatalf("fenced: %v, want ErrFenced as is", err)
	}
}
