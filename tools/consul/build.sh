#!/usr/bin/env bash
# Prints the path of the pinned Consul agent binary (v1.14.11, MPL-2.0),
# building it from the Go module proxy first if it is not cached yet
# (about 5-12 minutes on a cold module cache, seconds when warm).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/mcpgrain/consul-1.14.11"
bin="$cache/consul"
if [[ ! -x "$bin" ]]; then
  mkdir -p "$cache"
  echo "building consul v1.14.11 into $bin (one-time)..." >&2
  (cd "$here" && go build -o "$bin.tmp.$$" github.com/hashicorp/consul)
  mv -f "$bin.tmp.$$" "$bin"
fi
"$bin" version >/dev/null
echo "$bin"
