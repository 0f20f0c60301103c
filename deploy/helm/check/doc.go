// Package check holds the tests of mcpgrain's Helm chart
// (deploy/helm/mcpgrain). It is a module of its own so that the main
// module does not depend on Helm and the Kubernetes API types.
//
// The tests lint the chart with Helm's linter, render it with Helm's
// template engine (strict: a value the templates name but values.yaml
// lacks is an error) for the default values, values-production.yaml and a
// few variants, decode every rendered object strictly into the Kubernetes
// API types (an unknown or duplicate field fails), and check what a
// running cluster depends on:
//
//   - every node flag the pods pass exists in `mcpgrain node -h`, and the
//     rendered command line starts a real node whose /healthz and /readyz
//     answer on the port the probes name, that registers in a real Consul
//     agent ($MCPGRAIN_CONSUL_BIN) under its pod name and advertised
//     address, and that stops within the grace period;
//   - an SDK program's image runs from the same chart
//     (examples/hello/values.yaml, one more case of every structural
//     test): its entrypoint with "node" and the flags, which are all
//     flags of `hello node -h` too, and the rendered command line starts
//     the hello binary serving its own pack and code mode (--tools);
//   - secrets reach the node only as mounted files (--*-file flags) or
//     secretKeyRef variables: no secret value appears in any other object;
//   - terminationGracePeriodSeconds covers the preStop sleep plus the
//     node's --shutdown-timeout;
//   - the advertised cluster address is the pod IP or the pod's name in the
//     headless Service, and the cluster port is the one the node binds;
//   - the PodDisruptionBudget, Services, ServiceMonitor and NetworkPolicy
//     select the pods;
//   - the dashboard ConfigMap is deploy/grafana/dashboards/mcpgrain.json,
//     also from the packaged chart.
//
// Run it from this directory: go test ./...
package check
