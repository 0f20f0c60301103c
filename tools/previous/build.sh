#!/usr/bin/env bash
# Prints the path of the previous release's mcpgrain binary (the commit in
# tools/previous/COMMIT, which CHANGELOG.md names too), building it first
# if it is not cached yet: `git archive` of that commit from this clone's
# own history into a temporary directory, then `go build ./cmd/mcpgrain`
# there (about 15 s on 2 cores with a warm module cache; instant when
# cached). The rolling-upgrade test (internal/upgrade) starts a cluster of
# it and replaces its nodes with the current build; CI exports the path as
# MCPGRAIN_PREVIOUS_BIN. Tags are not used: they may not survive merges.
# With MCPGRAIN_TEST_RACE=1 the binary is built with -race (cached apart).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
commit="$(tr -d '[:space:]' < "$here/COMMIT")"
[[ "$commit" =~ ^[0-9a-f]{40}$ ]] || { echo "tools/previous/COMMIT: want a full commit hash, got '$commit'" >&2; exit 1; }
git -C "$root" cat-file -e "$commit^{commit}" 2>/dev/null || {
  echo "commit $commit (tools/previous/COMMIT) is not in this clone's history: fetch it (git fetch --unshallow)" >&2; exit 1; }
race=()
suffix=""
if [[ "${MCPGRAIN_TEST_RACE:-}" == "1" ]]; then race=(-race); suffix="-race"; fi
cache="${XDG_CACHE_HOME:-$HOME/.cache}/mcpgrain/mcpgrain-$commit$suffix"
bin="$cache/mcpgrain"
if [[ ! -x "$bin" ]]; then
  mkdir -p "$cache"
  src="$(mktemp -d)"
  trap 'rm -rf "$src"' EXIT
  echo "building mcpgrain at $commit into $bin (one-time)..." >&2
  git -C "$root" archive "$commit" | tar -x -C "$src"
  (cd "$src" && go build "${race[@]}" -o "$bin.tmp.$$" ./cmd/mcpgrain)
  mv -f "$bin.tmp.$$" "$bin"
fi
"$bin" version >/dev/null
echo "$bin"
