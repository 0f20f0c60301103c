#!/usr/bin/env bash
# Prints the path of the pinned Jaeger v2 all-in-one binary (the
# github.com/jaegertracing/jaeger version go.mod here requires, Apache-2.0),
# building it from the Go module proxy first if it is not cached yet (about
# 15-25 minutes on a cold module cache and 2 cores, seconds when warm). With
# no config it runs in memory: OTLP in on 4317 (gRPC) and 4318 (HTTP), the
# query API and UI on 16686. internal/tracetest runs it on free ports.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
version="$(awk '$1 == "github.com/jaegertracing/jaeger" {print $2}' "$here/go.mod" | head -n1)"
[[ -n "$version" ]] || { echo "tools/jaeger/go.mod: no github.com/jaegertracing/jaeger require line" >&2; exit 1; }
cache="${XDG_CACHE_HOME:-$HOME/.cache}/mcpgrain/jaeger-$version"
bin="$cache/jaeger"
if [[ ! -x "$bin" ]]; then
  mkdir -p "$cache"
  echo "building jaeger $version into $bin (one-time)..." >&2
  (cd "$here" && go build -o "$bin.tmp.$$" github.com/jaegertracing/jaeger/cmd/jaeger)
  mv -f "$bin.tmp.$$" "$bin"
fi
"$bin" version >/dev/null 2>&1
echo "$bin"
