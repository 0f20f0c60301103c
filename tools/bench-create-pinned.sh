#!/usr/bin/env bash
# Measures session creation on one server process pinned to a core of its
# own (docs/benchmarks.md, "Stop 22"): the server on CPU 1, the raw-HTTP
# client (`mcpgrain bench --scenario scale`) on CPU 0, the server's CPU
# read from /proc before and after.
#
#   tools/bench-create-pinned.sh BIN [SESSIONS] [node|baseline]
#
# node runs `BIN dev` (SQLite in a fresh directory, demo pack, no rate
# limit); baseline runs the plain go-sdk server (`BIN bench
# --serve-baseline`). GOGC in the environment reaches the server only.
# Prints one line: sessions/s (the client's), CPU a session and RSS (the
# server's). Needs taskset (util-linux) and two cores.
set -euo pipefail
bin="${1:?usage: $0 BIN [SESSIONS] [node|baseline]}"
n="${2:-10000}"
mode="${3:-node}"
port="${PORT:-18080}"
dir="$(mktemp -d -t mcpgrain-create-XXXXXX)"
export MCPGRAIN_TOKEN="bench-token-$(date +%s)"
gogc="${GOGC:-}"
unset GOGC
server=()
case "$mode" in
  node) server=("$bin" dev --data "$dir/data" --rate-limit 0 --tools demo --http "127.0.0.1:$port" --grpc "127.0.0.1:$((port + 1000))") ;;
  baseline) server=("$bin" bench --serve-baseline "127.0.0.1:$port") ;;
  *) echo "mode must be node or baseline" >&2; exit 2 ;;
esac
GOGC="$gogc" taskset -c 1 "${server[@]}" >"$dir/server.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 100); do
  curl -s -o /dev/null -X POST "http://127.0.0.1:$port/mcp" && break
  sleep 0.1
done
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
hz="$(getconf CLK_TCK)"
before="$(ticks)"
out="$(taskset -c 0 "$bin" bench --url "http://127.0.0.1:$port/mcp" --scenario scale \
  --scale-sessions "$n" --concurrency 16 --duration 1ms --progress=false 2>&1)"
after="$(ticks)"
rate="$(awk '$1 == "mcpgrain" && NF > 8 {print $4; exit}' <<<"$out")"
rss="$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status")"
echo "$mode GOGC=${gogc:-default} sessions/s=$rate cpu/session=$(( (after - before) * 1000000 / hz / n ))µs rss=$((rss / 1024))MiB"
