// Package testenv gives tests the real services they need — Postgres, a
// Consul agent and an Ory Hydra (the OAuth tests' authorization server) —
// and decides what happens when one cannot be had.
//
// Two tiers:
//   - default (`go test ./...`): a test that needs a service it cannot get
//     skips with a message naming what to set;
//   - integration (MCPGRAIN_INTEGRATION=1, what .ci/run sets): the same
//     situation fails the test, so CI can never pass by skipping.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Integration reports whether the integration tier is on: services must be
// available and tests that need them must not skip.
func Integration() bool { return os.Getenv("MCPGRAIN_INTEGRATION") == "1" }

// Unavailable skips t (default tier) or fails it (integration tier) because
// a required service or binary is missing.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if Integration() {
		t.Fatalf("integration tier (MCPGRAIN_INTEGRATION=1) requires this: %s", msg)
	}
	t.Skipf("skipping: %s (the integration tier, MCPGRAIN_INTEGRATION=1, makes this a failure)", msg)
}

// RandomSuffix returns n random bytes as lowercase hex.
func RandomSuffix(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Postgres returns a DSN for a fresh, empty schema on the Postgres server
// named by MCPGRAIN_TEST_POSTGRES_URL; the schema is dropped when t ends.
func Postgres(t testing.TB) string {
	t.Helper()
	schema := "mcpgrain_test_" + RandomSuffix(6)
	u := postgresObject(t, "a test schema", "CREATE SCHEMA "+schema, "DROP SCHEMA "+schema+" CASCADE")
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// postgresObject runs create on the Postgres server named by
// MCPGRAIN_TEST_POSTGRES_URL and drop when t ends (what names the object
// for messages), and returns that server's URL.
func postgresObject(t testing.TB, what, create, drop string) *url.URL {
	t.Helper()
	base := os.Getenv("MCPGRAIN_TEST_POSTGRES_URL")
	if base == "" {
		Unavailable(t, "MCPGRAIN_TEST_POSTGRES_URL is not set (e.g. postgres://postgres@127.0.0.1:5432/test): %s needs Postgres", what)
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("parse MCPGRAIN_TEST_POSTGRES_URL: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		Unavailable(t, "cannot connect to MCPGRAIN_TEST_POSTGRES_URL: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, create); err != nil {
		t.Fatalf("create %s: %v", what, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Logf("drop %s: %v", what, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, drop); err != nil {
			t.Logf("drop %s: %v", what, err)
		}
	})
	return u
}
