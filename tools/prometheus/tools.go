//go:build tools

// Package prometheus pins the Prometheus server and promtool used by the
// deployment tests in deploy/ (the Debian package is built without Consul
// service discovery). build.sh builds both with only the Consul and static
// service discovery plugins (tags remove_all_sd,enable_consul_sd).
package prometheus

import (
	_ "github.com/prometheus/prometheus/cmd/prometheus"
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
