#!/usr/bin/env bash
# Starts (or stops) a private Postgres for the store-cost measurement
# (internal/bench TestStoreCost): its own data directory and port, with
# pg_stat_statements preloaded, so statement counts, WAL and server CPU are
# this measurement's alone (a shared server's counters carry everyone's load).
#
#   tools/storecost/postgres.sh start   # prints the URL to export as MCPGRAIN_STORECOST_URL
#   tools/storecost/postgres.sh stop
#
# PGBIN (default /usr/lib/postgresql/15/bin), STORECOST_DIR (default
# /tmp/mcpgrain-storecost-pg) and STORECOST_PORT (default 55432) override.
# As root it runs the server as the postgres user (initdb refuses root).
set -euo pipefail
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
DIR=${STORECOST_DIR:-/tmp/mcpgrain-storecost-pg}
PORT=${STORECOST_PORT:-55432}
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
case "${1:-}" in
start)
	if [ ! -f "$DIR/PG_VERSION" ]; then
		mkdir -p "$DIR"
		[ "$(id -u)" = 0 ] && chown postgres "$DIR"
		as_pg "$PGBIN/initdb" -D "$DIR" -U postgres --auth=trust >/dev/null
		cat >>"$DIR/postgresql.conf" <<CONF
port = $PORT
listen_addresses = '127.0.0.1'
unix_socket_directories = '$DIR'
shared_preload_libraries = 'pg_stat_statements'
pg_stat_statements.track = all
pg_stat_statements.max = 10000
track_io_timing = on
CONF
	fi
	as_pg "$PGBIN/pg_ctl" -D "$DIR" -l "$DIR/server.log" -w start >/dev/null
	psql -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -qc 'CREATE EXTENSION IF NOT EXISTS pg_stat_statements' >/dev/null
	echo "postgres://postgres@127.0.0.1:$PORT/postgres?sslmode=disable"
	;;
stop)
	as_pg "$PGBIN/pg_ctl" -D "$DIR" -m fast stop
	;;
*)
	echo "usage: $0 start|stop" >&2
	exit 2
	;;
esac
