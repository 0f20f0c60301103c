// Package storetest runs contract tests of the store's domains on every
// store implementation: SQLite (a file in the test's directory) and
// Postgres (a schema of its own on MCPGRAIN_TEST_POSTGRES_URL, skipped
// when that is not set unless MCPGRAIN_INTEGRATION is).
package storetest

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/internal/testenv"
)

// Backends names a DSN maker for each store implementation.
func Backends() map[string]func(t testing.TB) string {
	return map[string]func(t testing.TB) string{
		"sqlite":   func(t testing.TB) string { return "sqlite:" + filepath.Join(t.TempDir(), "mcpgrain.db") },
		"postgres": func(t testing.TB) string { return testenv.Postgres(t) },
	}
}

// Open opens (and migrates) the store at dsn, closed when t ends.
func Open(t testing.TB, dsn string) store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("open %s: %v", store.Redact(dsn), err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// ForEach runs fn as a subtest on a fresh store of each implementation,
// with the store's DSN (to open it again, or read it with SQL of the
// test's own: [RawDB]).
func ForEach(t *testing.T, fn func(t *testing.T, s store.Store, dsn string)) {
	for name, mk := range Backends() {
		t.Run(name, func(t *testing.T) {
			dsn := mk(t)
			fn(t, Open(t, dsn), dsn)
		})
	}
}

// RawDB opens the database of the store at dsn for SQL of the test's own,
// closed when t ends.
func RawDB(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	driver, name := "pgx", dsn
	if path, ok := strings.CutPrefix(dsn, "sqlite:"); ok {
		driver, name = "sqlite", path
	}
	db, err := sql.Open(driver, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}
