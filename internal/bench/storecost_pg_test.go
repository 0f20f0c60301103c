package bench

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// stmtStat is one pg_stat_statements entry of the node's database.
type stmtStat struct {
	Query                 string
	Calls, Rows, WALBytes int64
}

// pgSample is a Postgres server's counters at one instant: the node's
// database's statements (pg_stat_statements), the server's WAL position
// and the CPU its processes used, and the proxy's wire counts.
type pgSample struct {
	Stmts map[int64]stmtStat
	WAL   int64
	CPU   time.Duration
	Wire  wireCounts
}

// stmtClass sorts a statement: "write" (INSERT, UPDATE, DELETE, or a WITH
// that does one), "read" (SELECT), "tx" (BEGIN, COMMIT, ROLLBACK) or
// "other"; table is the table it writes or reads first ("" if none).
func stmtClass(query string) (class, table string) {
	q := strings.ToLower(strings.Join(strings.Fields(query), " "))
	first, _, _ := strings.Cut(q, " ")
	switch first {
	case "begin", "commit", "rollback", "start":
		return "tx", ""
	case "insert", "update", "delete", "with", "select":
	default:
		return "other", ""
	}
	if m := writeTable.FindStringSubmatch(q); m != nil && (first != "select") {
		return "write", m[1]
	}
	if first == "with" || first == "select" {
		if m := readTable.FindStringSubmatch(q); m != nil {
			return "read", m[1]
		}
		return "read", ""
	}
	return "other", ""
}

var (
	writeTable = regexp.MustCompile(`(?:insert into|update|delete from) ([a-z_][a-z0-9_.]*)`)
	readTable  = regexp.MustCompile(`from ([a-z_][a-z0-9_.]*)`)
)

// opCost is what N operations of one kind cost the store.
type opCost struct {
	Op         string
	N          int
	Elapsed    time.Duration
	Statements map[string]float64 // by class: calls per operation
	RowsByTab  map[string]float64 // rows written per operation, by table
	CallsByTab map[string]float64 // write statements per operation, by table
	Rows       float64            // rows written per operation
	WAL        float64            // WAL bytes per operation (server LSN)
	CPU        time.Duration      // server CPU per operation
	// Sent, Received and Trips are the node's bytes to and from the
	// server and its round trips, per operation.
	Sent, Received, Trips float64
	Top                   []string // the statements, calls per operation
}

// costOf is the cost per operation of the n operations between a and b.
func costOf(op string, n int, elapsed time.Duration, a, b pgSample) opCost {
	c := opCost{Op: op, N: n, Elapsed: elapsed, Statements: map[string]float64{}, RowsByTab: map[string]float64{}, CallsByTab: map[string]float64{}}
	f := float64(n)
	type top struct {
		q     string
		calls float64
	}
	var tops []top
	for id, s := range b.Stmts {
		calls, rows := s.Calls-a.Stmts[id].Calls, s.Rows-a.Stmts[id].Rows
		if calls == 0 {
			continue
		}
		class, table := stmtClass(s.Query)
		c.Statements[class] += float64(calls) / f
		if class == "write" {
			c.Rows += float64(rows) / f
			c.RowsByTab[table] += float64(rows) / f
			c.CallsByTab[table] += float64(calls) / f
		}
		tops = append(tops, top{s.Query, float64(calls) / f})
	}
	sort.Slice(tops, func(i, j int) bool {
		return tops[i].calls > tops[j].calls || tops[i].calls == tops[j].calls && tops[i].q < tops[j].q
	})
	for _, t := range tops {
		q := strings.Join(strings.Fields(t.q), " ")
		if len(q) > 110 {
			q = q[:110] + "…"
		}
		c.Top = append(c.Top, fmt.Sprintf("%6.2f  %s", t.calls, q))
	}
	c.WAL = float64(b.WAL-a.WAL) / f
	c.CPU = (b.CPU - a.CPU) / time.Duration(n)
	w := b.Wire.sub(a.Wire)
	c.Sent, c.Received, c.Trips = float64(w.Sent)/f, float64(w.Received)/f, float64(w.RoundTrips)/f
	return c
}

// pgProbe reads a server's counters from a connection to another database
// of it (its own statements are not the node database's).
type pgProbe struct {
	db         *sql.DB
	dbname     string
	postmaster int // 0: the server's processes are not visible here
}

// sample reads the counters now.
func (p *pgProbe) sample(ctx context.Context, wire wireCounts) (pgSample, error) {
	s := pgSample{Stmts: map[int64]stmtStat{}, Wire: wire}
	rows, err := p.db.QueryContext(ctx, `
SELECT queryid, query, calls, rows, wal_bytes::BIGINT FROM pg_stat_statements s
JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = $1`, p.dbname)
	if err != nil {
		return s, fmt.Errorf("pg_stat_statements: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var st stmtStat
		if err := rows.Scan(&id, &st.Query, &st.Calls, &st.Rows, &st.WALBytes); err != nil {
			return s, fmt.Errorf("pg_stat_statements: %w", err)
		}
		s.Stmts[id] = st
	}
	if err := rows.Err(); err != nil {
		return s, fmt.Errorf("pg_stat_statements: %w", err)
	}
	if err := p.db.QueryRowContext(ctx, `SELECT (pg_current_wal_lsn() - '0/0')::BIGINT`).Scan(&s.WAL); err != nil {
		return s, fmt.Errorf("wal position: %w", err)
	}
	s.CPU = serverCPU(p.postmaster)
	return s, nil
}

// postmasterOf is the parent of a backend process: the server's postmaster
// (0 if /proc does not show it: the server runs elsewhere).
func postmasterOf(backend int) int {
	f, ok := procStat(backend)
	if !ok || len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// procStat is /proc/PID/stat's fields after the command name: [0] state,
// [1] ppid, … [11] utime, [12] stime, [13] cutime, [14] cstime.
func procStat(pid int) ([]string, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil, false
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return nil, false
	}
	return strings.Fields(string(b[i+1:])), true
}

// clockTick is USER_HZ, the unit of /proc/PID/stat times (100 on Linux).
const clockTick = 10 * time.Millisecond

// serverCPU is the CPU (user + system) a Postgres server's processes used
// so far: the postmaster's own and its reaped children's, plus every live
// child's (backends, walwriter, checkpointer, autovacuum…).
func serverCPU(postmaster int) time.Duration {
	if postmaster == 0 {
		return 0
	}
	ticks := func(f []string, from, to int) int64 {
		var t int64
		for i := from; i <= to && i < len(f); i++ {
			v, _ := strconv.ParseInt(f[i], 10, 64)
			t += v
		}
		return t
	}
	f, ok := procStat(postmaster)
	if !ok {
		return 0
	}
	total := ticks(f, 11, 14)
	ents, _ := os.ReadDir("/proc")
	want := strconv.Itoa(postmaster)
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f, ok := procStat(pid); ok && len(f) > 12 && f[1] == want {
			total += ticks(f, 11, 12)
		}
	}
	return time.Duration(total) * clockTick
}
