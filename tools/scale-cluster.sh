#!/usr/bin/env bash
# Starts a local mcpgrain cluster for `mcpgrain bench --scenario scale`
# (docs/benchmarks.md, "Scale"): the pinned Consul agent
# (tools/consul/build.sh) in dev mode, a fresh Postgres schema, and NODES
# `mcpgrain node` processes on 127.0.0.1, the way internal/testcluster
# starts them (except: production session placement, no rate limit).
#
#   tools/scale-cluster.sh                      start, print the bench command, wait for Ctrl-C
#   tools/scale-cluster.sh BENCH_FLAGS...       start, run the scale bench against it, stop
#
# e.g. tools/scale-cluster.sh --scale-sessions 100000 --concurrency 32 --duration 60s --baseline
#
# Everything it started is stopped on exit, and the schema dropped
# (KEEP_SCHEMA=1 keeps it for a look at the rows).
#
# Environment:
#   PG          base Postgres URL (default postgres://postgres@127.0.0.1:5432/test)
#   NODES       node processes (default 3)
#   HTTP_BASE   node i serves HTTP on HTTP_BASE+i (default 18080: 18081, 18082, …);
#               cluster traffic on HTTP_BASE-1000+i, Consul on HTTP_BASE+420…+424
#   BUDGET      --resident-memory of each node (default: half the machine's
#               memory divided among the nodes, as if each had its own share;
#               "auto" lets every node assume the whole machine)
#   GOMEMLIMIT  the collector's memory limit of each node (default: 90 % of
#               the machine's memory divided among the nodes; a node alone
#               takes 90 % of the whole machine, so several on one machine
#               would each let their heap grow into the others' share)
#   NODE_FLAGS  more flags for every node (the last of a repeated flag wins)
#   RUN_DIR     logs and the binary (default: a new temporary directory)
#   BIN         an mcpgrain binary to use instead of building one
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
PG="${PG:-postgres://postgres@127.0.0.1:5432/test}"
NODES="${NODES:-3}"
HTTP_BASE="${HTTP_BASE:-18080}"
RUN_DIR="${RUN_DIR:-$(mktemp -d -t mcpgrain-scale-XXXXXX)}"
mkdir -p "$RUN_DIR"
log() { printf 'scale-cluster: %s\n' "$*" >&2; }

pids=()
schema=""
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [[ -n "$schema" && "${KEEP_SCHEMA:-0}" != 1 ]]; then
    psql "$PG" -qc "DROP SCHEMA $schema CASCADE" >/dev/null 2>&1 || log "could not drop schema $schema"
  fi
  log "stopped; logs in $RUN_DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Wait until a command succeeds (up to $1 seconds).
await() {
  local secs="$1"; shift
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then return 1; fi
    sleep 0.2
  done
}

if [[ -z "${BIN:-}" ]]; then
  BIN="$RUN_DIR/mcpgrain"
  log "building mcpgrain into $BIN"
  (cd "$root" && go build -o "$BIN" ./cmd/mcpgrain)
fi
consul_bin="$("$root/tools/consul/build.sh")"

# Consul: a dev agent on ports of its own (an agent on 8500 may be running).
consul_http=$((HTTP_BASE + 420))
cat >"$RUN_DIR/consul.json" <<JSON
{"disable_update_check": true,
 "ports": {"http": $consul_http, "serf_lan": $((consul_http + 1)), "serf_wan": $((consul_http + 2)),
           "server": $((consul_http + 3)), "dns": -1, "https": -1, "grpc": -1, "grpc_tls": -1}}
JSON
"$consul_bin" agent -dev -bind 127.0.0.1 -client 127.0.0.1 -node "mcpgrain-scale-$$" \
  -config-file "$RUN_DIR/consul.json" >"$RUN_DIR/consul.log" 2>&1 &
pids+=($!)
await 30 curl -sf "http://127.0.0.1:$consul_http/v1/status/leader" || { log "consul did not start (see $RUN_DIR/consul.log)"; exit 1; }

# A fresh schema per run: the nodes migrate it; nothing of an earlier run
# counts in the store's size or rows.
schema="mcpgrain_scale_$(date +%Y%m%d_%H%M%S)_$$"
psql "$PG" -v ON_ERROR_STOP=1 -qc "CREATE SCHEMA $schema" >/dev/null
sep='?'; [[ "$PG" == *\?* ]] && sep='&'
dsn="$PG${sep}search_path=$schema"

total_kib=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
if [[ -z "${BUDGET:-}" ]]; then
  BUDGET="$((total_kib / 2 / NODES / 1024))MiB"
fi
export GOMEMLIMIT="${GOMEMLIMIT:-$((total_kib * 9 / 10 / NODES / 1024))MiB}"
token="mcpg_$(openssl rand -hex 24)"
state_key="$(openssl rand -hex 32)"
urls=()
for i in $(seq 1 "$NODES"); do
  http="127.0.0.1:$((HTTP_BASE + i))"
  # shellcheck disable=SC2086 # NODE_FLAGS is a list of flags
  "$BIN" node --node-id "n$i" --http "$http" --bind "127.0.0.1:$((HTTP_BASE - 1000 + i))" --grpc "" \
    --consul "127.0.0.1:$consul_http" --store "$dsn" --token "$token" --state-key "$state_key" \
    --rate-limit 0 --resident-memory "$BUDGET" ${NODE_FLAGS:-} >"$RUN_DIR/n$i.log" 2>&1 &
  pids+=($!)
  urls+=("http://$http/mcp")
done
for i in $(seq 1 "$NODES"); do
  await 60 curl -sf "http://127.0.0.1:$((HTTP_BASE + i))/readyz" || { log "node n$i is not ready (see $RUN_DIR/n$i.log)"; exit 1; }
done
members() { curl -sf "http://127.0.0.1:$((HTTP_BASE + 1))/metrics" | grep -q "^mcpgrain_cluster_members{[^}]*} $NODES\$"; }
await 60 members || { log "the nodes do not see each other (see $RUN_DIR/n*.log)"; exit 1; }

url_list="$(IFS=,; echo "${urls[*]}")"
log "$NODES nodes ready (resident memory $BUDGET, GOMEMLIMIT $GOMEMLIMIT each), store schema $schema, logs in $RUN_DIR"
bench=("$BIN" bench --scenario scale --url "$url_list" --token "$token" --scale-store "$dsn")
if (($# == 0)); then
  cat >&2 <<EOF

run the scale bench against it:
  $BIN bench --scenario scale --url '$url_list' --token $token \\
    --scale-store '$dsn' \\
    --scale-sessions 100000 --concurrency 32 --duration 60s

press Ctrl-C to stop the cluster
EOF
  wait "${pids[0]}"
else
  "${bench[@]}" "$@"
fi
