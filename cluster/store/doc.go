// Package store is mcpgrain's durable state: grain ownership with fencing
// epochs and grain records, reminders, and (for now) the application
// domains' tables: the SSE event log, the execution directory, execution
// runs and their tool-call journals, and tasks.
//
// One [Store] interface, two implementations with one schema and one list of
// versioned migrations: SQLite via modernc.org/sqlite (embedded default,
// single node, a file under --data) and Postgres via pgx (clusters). Both
// pass the same contract suite (contract_test.go; the Postgres run needs
// MCPGRAIN_TEST_POSTGRES_URL).
//
// Ownership in one picture:
//
//	Acquire(grain, node)        epoch := epoch+1, owner := node  (atomic)
//	Save(grain, epoch, record)  only if epoch is still current, else ErrFenced
//	Release(grain, epoch)       owner := "" only if epoch is still current
//
// See the package example for the picture in code.
package store
