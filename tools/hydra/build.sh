#!/usr/bin/env bash
# Prints the path of the pinned Ory Hydra binary (the github.com/ory/hydra/v2
# version go.mod here requires, Apache-2.0): the OAuth 2.1 authorization
# server the OAuth integration tests start (internal/testenv.StartHydra).
# It is built from the Go module proxy first if it is not cached yet (about
# 1.5 minutes on a cold module and build cache on 2 cores, instant when
# warm). Hydra's "memory" DSN needs a cgo SQLite build; the tests point it
# at Postgres instead, so the default (cgo-free) build is enough.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
version="$(awk '$1 == "github.com/ory/hydra/v2" {print $2}' "$here/go.mod" | head -n1)"
[[ -n "$version" ]] || { echo "tools/hydra/go.mod: no github.com/ory/hydra/v2 require line" >&2; exit 1; }
cache="${XDG_CACHE_HOME:-$HOME/.cache}/mcpgrain/hydra-$version"
bin="$cache/hydra"
if [[ ! -x "$bin" ]]; then
  mkdir -p "$cache"
  echo "building hydra $version into $bin (one-time)..." >&2
  (cd "$here" && go build -o "$bin.tmp.$$" github.com/ory/hydra/v2)
  mv -f "$bin.tmp.$$" "$bin"
fi
"$bin" version >/dev/null
echo "$bin"
