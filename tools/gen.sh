#!/usr/bin/env bash
# Regenerates protobuf Go code and lints the .proto files with pinned tools:
# buf from tools/buf/go.mod, protoc-gen-go from the main go.mod (so generated
# code always matches the protobuf runtime we link).
set -euo pipefail
cd "$(dirname "$0")/.."
go tool -modfile=tools/buf/go.mod buf lint
go tool -modfile=tools/buf/go.mod buf generate
