//go:build tools

// Package consul pins the Consul agent used by mcpgrain's integration tests.
// Build it with: go build -o BIN/consul github.com/hashicorp/consul
package consul

import _ "github.com/hashicorp/consul"
