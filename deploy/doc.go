// Package deploy holds no code: it is the home of mcpgrain's deployment
// artifacts and of the tests that keep them honest.
//
//   - Dockerfile: the multi-stage, static, non-root image the repository's
//     docker-compose.yml builds for its three nodes.
//   - prometheus/prometheus.yml: Prometheus finding every node through
//     Consul service discovery (the node's gateway address is in the Consul
//     service meta "http"); prometheus/alerts.yml: alerting rules, unit
//     tested by prometheus/alerts_test.yml.
//   - grafana/: the mcpgrain dashboard and Grafana provisioning files.
//   - helm/mcpgrain: the Helm chart for Kubernetes; its tests are in
//     helm/check, a Go module of its own (so this module does not depend
//     on Helm and the Kubernetes API types), run by .ci/run.
//
// The tests check that the dashboard and the rules reference only metrics
// documented in docs/metrics.md, that every expression parses (promtool),
// that docker-compose.yml references existing files and real flags, that
// the Dockerfile builds the binary exactly as CI does, and (integration
// tier) that a real Prometheus using prometheus.yml scrapes a real
// three-node cluster found through a real Consul agent.
package deploy
