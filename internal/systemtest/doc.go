// Package systemtest holds mcpgrain's system tests: scenarios that start
// real nodes (in this process through internal/app, or as a cluster of
// `mcpgrain node` processes with Consul and Postgres through
// internal/testcluster) and drive them as a client would, over MCP, the
// HTTP and gRPC approval APIs, the CLI and a headless browser. Each test's
// doc comment says its scenario.
//
// The tests of the gateway's own HTTP handling (routing, limits, auth,
// metrics) stay in package gateway; the unit tests of each package stay
// beside it. Tiers: multi-process tests skip without Postgres and Consul
// (MCPGRAIN_TEST_POSTGRES_URL, MCPGRAIN_CONSUL_BIN) unless
// MCPGRAIN_INTEGRATION=1, and MCPGRAIN_TEST_RACE=1 builds the node binary
// with -race.
//
//	go test ./internal/systemtest
package systemtest
