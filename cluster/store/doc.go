// Package store is the cluster's durable state: grain ownership with
// fencing epochs, grain records and durable reminders.
//
// One [Store] interface, two implementations with one schema and one
// history of versioned migrations: SQLite via modernc.org/sqlite (embedded
// default, single node, a file under --data) and Postgres via pgx
// (clusters). Both pass the same contract suite (contract_test.go; the
// Postgres run needs MCPGRAIN_TEST_POSTGRES_URL).
//
// The application's domains keep their own tables in the same database,
// each in its own package with its own contract tests (the SSE event log,
// the execution directory, journal runs, tasks): they run their SQL through
// [DB] (the store's writer, fenced by a grain's epoch with [FencedBy] or
// [Fence]) and register their migrations with [RegisterMigrations], in
// the one version sequence of the database.
//
// Ownership in one picture:
//
//	Acquire(grain, node)        epoch := epoch+1, owner := node  (atomic)
//	Save(grain, epoch, record)  only if epoch is still current, else ErrFenced
//	Release(grain, epoch)       owner := "" only if epoch is still current
//
// See the package example for the picture in code.
package store
