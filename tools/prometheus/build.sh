#!/usr/bin/env bash
# Prints the directory holding the pinned Prometheus server and promtool
# (the github.com/prometheus/prometheus version go.mod here requires,
# Apache-2.0), building them from the Go module proxy first if they are not
# cached yet (about 7 CPU-minutes on a cold module cache, instant when
# warm). Only Consul (plus the built-in file, HTTP and static) service
# discovery is compiled in, which keeps the build small. Debian's
# prometheus package cannot be used: it is built without Consul service
# discovery.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
version="$(awk '$1 == "require" && $2 == "github.com/prometheus/prometheus" {print $3}' "$here/go.mod")"
[[ -n "$version" ]] || { echo "tools/prometheus/go.mod: no prometheus require line" >&2; exit 1; }
dir="${XDG_CACHE_HOME:-$HOME/.cache}/mcpgrain/prometheus-$version"
if [[ ! -x "$dir/prometheus" || ! -x "$dir/promtool" ]]; then
  mkdir -p "$dir"
  echo "building prometheus and promtool $version into $dir (one-time)..." >&2
  for cmd in prometheus promtool; do
    (cd "$here" && go build -tags remove_all_sd,enable_consul_sd -o "$dir/$cmd.tmp.$$" "github.com/prometheus/prometheus/cmd/$cmd")
    mv -f "$dir/$cmd.tmp.$$" "$dir/$cmd"
  done
fi
"$dir/prometheus" --version >/dev/null
"$dir/promtool" --version >/dev/null
echo "$dir"
