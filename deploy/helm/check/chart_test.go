package check

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// Sentinel secret values: none may appear outside a Secret.
const (
	sentinelKeys     = `{"keys":[{"token":"sentinel-bearer-token-7f3a9c","user":"alice","org":"acme","role":"admin"}]}`
	sentinelToken    = "sentinel-dev-token-52be11"
	sentinelStateKey = "5e471e1ba5e471e1ba5e471e1ba5e471e1ba5e471e1ba5e471e1ba5e471e1ba0"
	sentinelDSN      = "postgres://mcpgrain:sentinel-db-password-c0ffee@db:5432/mcpgrain"
)

// created are values under which the chart creates its Secret from values.
var created = map[string]any{
	"secrets.create":          true,
	"secrets.token.key":       "token",
	"secrets.values.keysJson": sentinelKeys,
	"secrets.values.stateKey": sentinelStateKey,
	"secrets.values.storeDSN": sentinelDSN,
	"secrets.values.token":    sentinelToken,
}

// cases are the value sets every structural test renders.
func cases(t *testing.T) map[string]map[string]any {
	defaults := valuesFile(t, "")
	production := valuesFile(t, "values-production.yaml")
	return map[string]map[string]any{
		"defaults":   defaults,
		"production": production,
		programCase:  programValues(t),
		"secrets created by the chart, everything optional on": withValues(withValues(defaults, created), map[string]any{
			"ingress.enabled": true, "serviceMonitor.enabled": true, "dashboard.enabled": true, "networkPolicy.enabled": true,
		}),
		"existing secrets, postgres by host, consul by address, no gRPC": withValues(defaults, map[string]any{
			"secrets.existingSecret":         "node-secrets",
			"secrets.storeDSN.key":           "",
			"postgres.host":                  "db.example.internal",
			"postgres.passwordSecret.name":   "db-app",
			"postgres.sslmode":               "verify-full",
			"postgres.tls.caSecret.name":     "db-ca",
			"postgres.tls.clientCertSecret":  "db-client",
			"consul.hostAgent":               false,
			"consul.address":                 "consul.consul.svc.cluster.local:8500",
			"consul.tls.enabled":             true,
			"consul.tls.serverName":          "consul.example.internal",
			"consul.tls.caSecret.name":       "consul-ca",
			"consul.tls.clientCertSecret":    "consul-client",
			"consul.tokenSecret.name":        "consul-acl",
			"gateway.grpcPort":               0,
			"node.residentMemory":            "2GiB",
			"node.residentSoftCap":           1000,
			"resources.limits.memory":        nil,
			"podDisruptionBudget.enabled":    false,
			"serviceAccount.create":          false,
			"cluster.advertise":              "dns",
			"networkPolicy.enabled":          true,
			"networkPolicy.gatewayFrom":      []any{map[string]any{"namespaceSelector": map[string]any{}}},
			"node.extraArgs":                 []any{"--session-timeout=10m"},
			"secrets.keysFile.secret":        "api-keys",
			"secrets.stateKey.secret":        "state-key",
			"secrets.token.key":              "",
			"gateway.trustedOrigins":         []any{"https://app.example.com", "https://admin.example.com"},
			"gateway.service.type":           "LoadBalancer",
			"gateway.service.httpPort":       8080,
			"image.digest":                   "sha256:" + strings.Repeat("ab", 32),
			"topologySpreadConstraints":      []any{},
			"podAnnotations":                 map[string]any{"example.com/team": "mcp"},
			"dashboard.enabled":              true,
			"dashboard.annotations":          map[string]any{"grafana_folder": "mcpgrain"},
			"serviceMonitor.enabled":         true,
			"serviceMonitor.labels":          map[string]any{"release": "prometheus"},
			"ingress.enabled":                true,
			"ingress.tls":                    []any{map[string]any{"secretName": "tls", "hosts": []any{"mcp.example.com"}}},
			"gateway.grpcTLS.enabled":        false,
			"cluster.tls.enabled":            false,
			"node.execMaxRunning":            4,
			"node.execMaxRunningPerOrg":      3,
			"probes.readiness.periodSeconds": 3,
		}),
	}
}

func TestLint(t *testing.T) {
	for _, file := range []string{"", "values-production.yaml"} {
		name := file
		if name == "" {
			name = "defaults"
		}
		t.Run(name, func(t *testing.T) {
			for _, kv := range kubeVersions {
				v, err := chartutil.ParseKubeVersion(kv)
				if err != nil {
					t.Fatal(err)
				}
				l := lint.AllWithKubeVersion(chartDir, valuesFile(t, file), namespace, v)
				for _, m := range l.Messages {
					if m.Severity >= support.WarningSev {
						t.Errorf("helm lint (Kubernetes %s): %v", kv, m)
					} else {
						t.Logf("helm lint (Kubernetes %s): %v", kv, m)
					}
				}
			}
		})
	}
}

// TestRendersStrictly renders every case and decodes every object into its
// Kubernetes type with unknown fields as errors (render does both), and
// checks which objects each renders.
func TestRendersStrictly(t *testing.T) {
	c := loadChart(t)
	want := map[string][]string{
		"defaults":   {"*v1.Service", "*v1.Service", "*v1.ServiceAccount", "*v1.StatefulSet", "*v1.PodDisruptionBudget"},
		programCase:  {"*v1.Service", "*v1.Service", "*v1.ServiceAccount", "*v1.StatefulSet", "*v1.PodDisruptionBudget"},
		"production": {"*v1.Service", "*v1.Service", "*v1.ServiceAccount", "*v1.StatefulSet", "*v1.PodDisruptionBudget", "*v1.Ingress", "*v1.NetworkPolicy", "*v1.ServiceMonitor", "*v1.ConfigMap"},
		"secrets created by the chart, everything optional on":           {"*v1.Service", "*v1.Service", "*v1.ServiceAccount", "*v1.StatefulSet", "*v1.PodDisruptionBudget", "*v1.Ingress", "*v1.NetworkPolicy", "*v1.ServiceMonitor", "*v1.ConfigMap", "*v1.Secret"},
		"existing secrets, postgres by host, consul by address, no gRPC": {"*v1.Service", "*v1.Service", "*v1.StatefulSet", "*v1.Ingress", "*v1.NetworkPolicy", "*v1.ServiceMonitor", "*v1.ConfigMap"},
	}
	for name, vals := range cases(t) {
		t.Run(name, func(t *testing.T) {
			r := render(t, c, vals)
			var got []string
			for _, o := range r.objects {
				got = append(got, fmt.Sprintf("%T", o))
			}
			if !sameMultiset(got, want[name]) {
				t.Errorf("rendered %v, want %v", got, want[name])
			}
		})
	}
}

func sameMultiset(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	count := map[string]int{}
	for _, s := range a {
		count[s]++
	}
	for _, s := range b {
		count[s]--
	}
	for _, n := range count {
		if n != 0 {
			return false
		}
	}
	return true
}

// TestProbesMatchTheNode: the probes ask the node's /healthz and /readyz
// on the port its --http flag listens on, over plain HTTP (the node
// serves no TLS on --http), and the Services' ports reach the flags'.
func TestProbesMatchTheNode(t *testing.T) {
	c := loadChart(t)
	for name, vals := range cases(t) {
		t.Run(name, func(t *testing.T) {
			r := render(t, c, vals)
			n := nodeOf(t, r)
			f := n.flags(t)
			httpPort := listenPort(t, "http", f["http"])
			if got := n.port(t, "http"); got != httpPort {
				t.Errorf("container port http is %d, --http listens on %d", got, httpPort)
			}
			for probe, want := range map[string]struct {
				p    *corev1.Probe
				path string
			}{
				"startupProbe":   {n.container.StartupProbe, "/healthz"},
				"livenessProbe":  {n.container.LivenessProbe, "/healthz"},
				"readinessProbe": {n.container.ReadinessProbe, "/readyz"},
			} {
				if want.p == nil || want.p.HTTPGet == nil {
					t.Errorf("%s: want an HTTP GET probe, got %+v", probe, want.p)
					continue
				}
				g := want.p.HTTPGet
				if g.Path != want.path {
					t.Errorf("%s asks %s, want %s", probe, g.Path, want.path)
				}
				if g.Port.String() != "http" {
					t.Errorf("%s asks port %s, want the container port http", probe, g.Port.String())
				}
				if g.Scheme != "" && g.Scheme != corev1.URISchemeHTTP {
					t.Errorf("%s uses %s: the node serves plain HTTP", probe, g.Scheme)
				}
			}
			// /readyz answers at once; a liveness probe must not kill a
			// node that is still joining: the startup probe covers
			// --join-timeout (30s).
			sp := n.container.StartupProbe
			if budget := sp.PeriodSeconds * sp.FailureThreshold; budget < 30 {
				t.Errorf("the startup probe gives up after %ds, before the node's own --join-timeout (30s)", budget)
			}
			grpc, hasGRPC := f["grpc"]
			if hasGRPC && grpc != "" {
				if got, want := n.port(t, "grpc"), listenPort(t, "grpc", grpc); got != want {
					t.Errorf("container port grpc is %d, --grpc listens on %d", got, want)
				}
			}
			// The gateway Service targets the named ports.
			for _, svc := range all[*corev1.Service](r) {
				for _, p := range svc.Spec.Ports {
					n.port(t, p.TargetPort.String())
				}
			}
		})
	}
}

// listenPort parses a listen address that must be on every interface.
func listenPort(t *testing.T, flag, addr string) int32 {
	t.Helper()
	host, port, ok := strings.Cut(addr, ":")
	p, err := strconv.Atoi(port)
	if !ok || err != nil || host != "0.0.0.0" {
		t.Fatalf("--%s=%s: want 0.0.0.0:<port> (pods are reached on their IP)", flag, addr)
	}
	return int32(p)
}

// TestGracePeriodCoversTheDrain: SIGTERM comes after the preStop sleep,
// and the node then takes at most --shutdown-timeout (it exits when that
// runs out: internal/cli TestNodeShutdownTimeoutBoundsTheStop); the
// kubelet must not SIGKILL it before.
func TestGracePeriodCoversTheDrain(t *testing.T) {
	c := loadChart(t)
	for name, vals := range cases(t) {
		t.Run(name, func(t *testing.T) {
			n := nodeOf(t, render(t, c, vals))
			f := n.flags(t)
			shutdown, err := time.ParseDuration(f["shutdown-timeout"])
			if err != nil || shutdown <= 0 {
				t.Fatalf("--shutdown-timeout=%q: want the node's bound set explicitly", f["shutdown-timeout"])
			}
			ps := n.container.Lifecycle
			if ps == nil || ps.PreStop == nil || ps.PreStop.Sleep == nil || ps.PreStop.Exec != nil {
				t.Fatalf("preStop: want the kubelet's sleep (the image has no shell), got %+v", ps)
			}
			sleep := time.Duration(ps.PreStop.Sleep.Seconds) * time.Second
			if sleep < time.Second {
				t.Errorf("preStop sleeps %s: endpoint removal needs time to propagate", sleep)
			}
			grace := time.Duration(deref64(n.pod.TerminationGracePeriodSeconds)) * time.Second
			if grace <= sleep+shutdown {
				t.Errorf("terminationGracePeriodSeconds %s <= preStop %s + --shutdown-timeout %s: the kubelet kills the node mid-drain", grace, sleep, shutdown)
			}
			t.Logf("grace %s = preStop %s + drain bound %s + margin %s", grace, sleep, shutdown, grace-sleep-shutdown)
		})
	}
}

func deref64(p *int64) int64 {
	if p == nil {
		return 30 // the API's default
	}
	return *p
}

// TestAdvertiseWiring: the node's identity and the address its peers dial.
func TestAdvertiseWiring(t *testing.T) {
	c := loadChart(t)
	for name, vals := range cases(t) {
		t.Run(name, func(t *testing.T) {
			r := render(t, c, vals)
			n := nodeOf(t, r)
			f := n.flags(t)
			// Every $(VAR) in the args is a variable of the container.
			for _, a := range n.container.Args {
				for _, m := range varRef.FindAllStringSubmatch(a, -1) {
					if _, ok := n.env(m[1]); !ok {
						t.Errorf("argument %q references $(%s), which the container does not define", a, m[1])
					}
				}
			}
			fieldRef := func(name, path string) {
				t.Helper()
				e, ok := n.env(name)
				if !ok || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != path {
					t.Errorf("%s: want the downward API's %s, got %+v", name, path, e)
				}
			}
			if f["node-id"] != "$(POD_NAME)" {
				t.Errorf("--node-id=%s: want the pod's name, stable in a StatefulSet", f["node-id"])
			}
			fieldRef("POD_NAME", "metadata.name")

			bindPort := listenPort(t, "bind", f["bind"])
			if got := n.port(t, "cluster"); got != bindPort {
				t.Errorf("container port cluster is %d, --bind listens on %d", got, bindPort)
			}
			headless := (*corev1.Service)(nil)
			for _, s := range all[*corev1.Service](r) {
				if s.Name == n.sts.Spec.ServiceName {
					headless = s
				}
			}
			if headless == nil {
				t.Fatalf("no Service %s (the StatefulSet's serviceName)", n.sts.Spec.ServiceName)
			}
			if headless.Spec.ClusterIP != corev1.ClusterIPNone || !headless.Spec.PublishNotReadyAddresses {
				t.Errorf("Service %s: want headless, publishing members before they are ready (they dial each other while joining)", headless.Name)
			}
			if !servicePortTargets(headless, "cluster", bindPort) {
				t.Errorf("Service %s has no port cluster for %d", headless.Name, bindPort)
			}

			host, port, ok := strings.Cut(f["advertise"], ":")
			if !ok || port != strconv.Itoa(int(bindPort)) {
				t.Errorf("--advertise=%s: want the --bind port %d", f["advertise"], bindPort)
			}
			switch advertise := valueAt(t, c, vals, "cluster.advertise"); advertise {
			case "podIP":
				if host != "$(POD_IP)" {
					t.Errorf("advertise podIP: --advertise=%s, want $(POD_IP):port", f["advertise"])
				}
				fieldRef("POD_IP", "status.podIP")
			case "dns":
				want := fmt.Sprintf("$(POD_NAME).%s.%s.svc.cluster.local", headless.Name, namespace)
				if host != want {
					t.Errorf("advertise dns: --advertise host %s, want %s", host, want)
				}
			default:
				t.Fatalf("cluster.advertise %q", advertise)
			}
			// Cluster TLS: the files are mounted from the Secret named.
			if f["cluster-tls-cert"] != "" {
				secret := valueAt(t, c, vals, "cluster.tls.secretName")
				for flag, key := range map[string]string{"cluster-tls-cert": "tls.crt", "cluster-tls-key": "tls.key", "cluster-tls-ca": "ca.crt"} {
					src, ok := n.fileSource(t, f[flag])
					if !ok || src.secret != secret || src.key != key {
						t.Errorf("--%s=%s comes from %+v, want key %s of Secret %s", flag, f[flag], src, key, secret)
					}
				}
			}
		})
	}
}

func servicePortTargets(s *corev1.Service, name string, port int32) bool {
	for _, p := range s.Spec.Ports {
		if p.Name == name && (p.TargetPort.String() == name || p.TargetPort.IntValue() == int(port)) {
			return true
		}
	}
	return false
}

// valueAt returns a value of the merged values (chart defaults under the
// case's values) as a string.
func valueAt(t *testing.T, c *chart.Chart, vals map[string]any, key string) string {
	t.Helper()
	merged, err := chartutil.CoalesceValues(c, vals)
	if err != nil {
		t.Fatal(err)
	}
	v, err := merged.PathValue(key)
	if err != nil {
		t.Fatalf("values: %s: %v", key, err)
	}
	return fmt.Sprint(v)
}

// TestSecretsAreReferencedNeverInlined: the node's secrets reach it only
// as files mounted from Secrets (the --*-file flags) or as secretKeyRef
// variables; no secret value is in an argument, a plain variable, a
// ConfigMap or any other object.
func TestSecretsAreReferencedNeverInlined(t *testing.T) {
	c := loadChart(t)
	sentinels := []string{sentinelKeys, "sentinel-bearer-token-7f3a9c", sentinelToken, sentinelStateKey, sentinelDSN, "sentinel-db-password-c0ffee"}
	for name, vals := range cases(t) {
		t.Run(name, func(t *testing.T) {
			r := render(t, c, vals)
			for _, o := range r.objects {
				if _, isSecret := o.(*corev1.Secret); isSecret {
					continue
				}
				b, err := json.Marshal(o)
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range sentinels {
					for _, form := range []string{s, base64.StdEncoding.EncodeToString([]byte(s))} {
						if strings.Contains(string(b), form) {
							t.Errorf("%T %s (%s) contains a secret value", o, nameOf(o), r.sources[o])
						}
					}
				}
			}

			n := nodeOf(t, r)
			f := n.flags(t)
			for _, secretFlag := range []string{"token", "state-key", "keys"} {
				if _, ok := f[secretFlag]; ok {
					t.Errorf("--%s is an argument: secrets are --%s-file", secretFlag, secretFlag)
				}
			}
			if dsn, ok := f["store"]; ok {
				u, err := url.Parse(dsn)
				if err != nil {
					t.Fatalf("--store=%s: %v", dsn, err)
				}
				if _, has := u.User.Password(); has || u.Query().Has("password") {
					t.Errorf("--store carries a password")
				}
				if e, ok := n.env("PGPASSWORD"); !ok || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
					t.Errorf("--store without a password: want PGPASSWORD from a secretKeyRef, got %+v", e)
				} else if want := valueAt(t, c, vals, "postgres.passwordSecret.name"); e.ValueFrom.SecretKeyRef.Name != want {
					t.Errorf("PGPASSWORD from Secret %s, want %s", e.ValueFrom.SecretKeyRef.Name, want)
				}
			} else if f["store-file"] == "" {
				t.Errorf("neither --store-file nor --store")
			}
			// Variables that would carry a secret are never plain values.
			for _, e := range n.container.Env {
				upper := strings.ToUpper(e.Name)
				if e.Value != "" && (strings.Contains(upper, "PASSWORD") || strings.HasSuffix(upper, "_TOKEN") || upper == "MCPGRAIN_STATE_KEY" || upper == "MCPGRAIN_STORE" || upper == "MCPGRAIN_KEYS") {
					t.Errorf("variable %s is a plain value", e.Name)
				}
			}

			// Each secret file flag reads a file mounted from the Secret
			// and key the values name, readable by the pod's group only
			// (the node refuses a keys file readable by others).
			secretName := valueAt(t, c, vals, "secrets.existingSecret")
			if secretName == "" {
				secretName = "mcpgrain-secrets"
			}
			for flag, item := range map[string]string{"keys-file": "keysFile", "state-key-file": "stateKey", "store-file": "storeDSN", "token-file": "token"} {
				file, ok := f[flag]
				if !ok {
					continue
				}
				want := secretFile{secret: secretName, key: valueAt(t, c, vals, "secrets."+item+".key")}
				if own := valueAt(t, c, vals, "secrets."+item+".secret"); own != "" {
					want.secret = own
				}
				got, ok := n.fileSource(t, file)
				if !ok || got.secret != want.secret || got.key != want.key {
					t.Errorf("--%s=%s is %+v, want key %s of Secret %s", flag, file, got, want.key, want.secret)
				}
				if got.mode&0o007 != 0 {
					t.Errorf("--%s=%s has mode %04o: readable by others", flag, file, got.mode)
				}
				if fsGroup := n.pod.SecurityContext.FSGroup; fsGroup == nil {
					t.Errorf("no fsGroup: the non-root node cannot read its 0440 secret files")
				}
			}
			for _, must := range []string{"state-key-file"} {
				if f[must] == "" {
					t.Errorf("--%s is not set", must)
				}
			}
			if f["keys-file"] == "" && f["token-file"] == "" {
				t.Errorf("no bearer tokens: neither --keys-file nor --token-file")
			}
			// Every other file the node reads is mounted from a Secret too:
			// TLS material and Consul's token and CA.
			for flag, file := range f {
				if strings.HasPrefix(file, "/etc/mcpgrain/") {
					if _, ok := n.fileSource(t, file); !ok {
						t.Errorf("--%s=%s: no Secret is mounted there", flag, file)
					}
				}
			}
			for _, e := range n.container.Env {
				if strings.HasPrefix(e.Value, "/etc/mcpgrain/") {
					if _, ok := n.fileSource(t, e.Value); !ok {
						t.Errorf("%s=%s: no Secret is mounted there", e.Name, e.Value)
					}
				}
			}
			if dsn := f["store"]; dsn != "" {
				u, _ := url.Parse(dsn)
				for _, p := range []string{"sslrootcert", "sslcert", "sslkey"} {
					if file := u.Query().Get(p); file != "" {
						if _, ok := n.fileSource(t, file); !ok {
							t.Errorf("--store %s=%s: no Secret is mounted there", p, file)
						}
					}
				}
			}

			// The chart's own Secret holds exactly what the pods read.
			for _, s := range all[*corev1.Secret](r) {
				if s.Name != secretName {
					t.Errorf("the chart creates Secret %s; the pods read %s", s.Name, secretName)
				}
				for flag := range map[string]bool{"keys-file": true, "state-key-file": true, "store-file": true, "token-file": true} {
					if file, ok := f[flag]; ok {
						src, _ := n.fileSource(t, file)
						if _, ok := s.Data[src.key]; !ok && src.secret == s.Name {
							t.Errorf("Secret %s has no key %s for --%s", s.Name, src.key, flag)
						}
					}
				}
			}
		})
	}
}

func nameOf(o runtime.Object) string {
	if m, ok := o.(metav1.Object); ok {
		return m.GetName()
	}
	return "?"
}

// TestSelectorsSelectThePods: the PodDisruptionBudget, Services,
// ServiceMonitor, NetworkPolicy and spread constraints select the member
// pods (and the ServiceMonitor one Service only).
func TestSelectorsSelectThePods(t *testing.T) {
	c := loadChart(t)
	for name, vals := range cases(t) {
		t.Run(name, func(t *testing.T) {
			r := render(t, c, vals)
			n := nodeOf(t, r)
			pod := labels.Set(n.sts.Spec.Template.Labels)
			selects := func(what string, sel *metav1.LabelSelector) {
				t.Helper()
				s, err := metav1.LabelSelectorAsSelector(sel)
				if err != nil || s.Empty() || !s.Matches(pod) {
					t.Errorf("%s selector %v does not select the pods %v (%v)", what, sel, pod, err)
				}
			}
			selects("StatefulSet", n.sts.Spec.Selector)
			for _, p := range all[*policyv1.PodDisruptionBudget](r) {
				selects("PodDisruptionBudget", p.Spec.Selector)
				if p.Spec.MaxUnavailable == nil || p.Spec.MaxUnavailable.IntValue() < 1 || p.Spec.MinAvailable != nil {
					t.Errorf("PodDisruptionBudget: want maxUnavailable >= 1 (a drain must be able to move a member), got %+v", p.Spec)
				}
			}
			for _, s := range all[*corev1.Service](r) {
				if !labels.SelectorFromSet(s.Spec.Selector).Matches(pod) || len(s.Spec.Selector) == 0 {
					t.Errorf("Service %s selector %v does not select the pods", s.Name, s.Spec.Selector)
				}
			}
			for _, np := range all[*networkingv1.NetworkPolicy](r) {
				selects("NetworkPolicy", &np.Spec.PodSelector)
				peers := 0
				for _, rule := range np.Spec.Ingress {
					for _, p := range rule.Ports {
						if p.Port != nil && p.Port.String() == "cluster" {
							for _, from := range rule.From {
								if from.PodSelector != nil {
									selects("NetworkPolicy cluster-port peers", from.PodSelector)
									peers++
								}
							}
						}
					}
				}
				if peers == 0 {
					t.Errorf("NetworkPolicy lets no member reach the cluster port")
				}
			}
			for _, tsc := range n.pod.TopologySpreadConstraints {
				selects("topologySpreadConstraint "+tsc.TopologyKey, tsc.LabelSelector)
			}
			for _, sm := range all[*monitoringv1.ServiceMonitor](r) {
				s, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
				if err != nil {
					t.Fatal(err)
				}
				var picked []*corev1.Service
				for _, svc := range all[*corev1.Service](r) {
					if s.Matches(labels.Set(svc.Labels)) {
						picked = append(picked, svc)
					}
				}
				if len(picked) != 1 || picked[0].Name != n.sts.Spec.ServiceName {
					t.Fatalf("ServiceMonitor selects %d Services, want the headless %s only (every member, ready or not)", len(picked), n.sts.Spec.ServiceName)
				}
				for _, ep := range sm.Spec.Endpoints {
					if ep.Path != "/metrics" || !servicePortTargets(picked[0], ep.Port, 0) || !ep.HonorLabels {
						t.Errorf("ServiceMonitor endpoint %+v: want port http, path /metrics, honorLabels (every series has its node label)", ep)
					}
				}
			}
			for _, ing := range all[*networkingv1.Ingress](r) {
				for _, rule := range ing.Spec.Rules {
					for _, p := range rule.HTTP.Paths {
						b := p.Backend.Service
						var target *corev1.Service
						for _, s := range all[*corev1.Service](r) {
							if s.Name == b.Name {
								target = s
							}
						}
						if target == nil || target.Spec.ClusterIP == corev1.ClusterIPNone || !servicePortTargets(target, b.Port.Name, 0) {
							t.Errorf("Ingress backend %s:%s is not the gateway Service's http port", b.Name, b.Port.Name)
						}
					}
				}
			}
		})
	}
}

// TestResidencyBudgetFollowsTheMemoryLimit: --resident-memory auto is half
// of the cgroup's memory limit, so the container has one, and requests
// equal it (a node is not OOM-killed because a neighbour used more).
func TestResidencyBudgetFollowsTheMemoryLimit(t *testing.T) {
	c := loadChart(t)
	for name, vals := range cases(t) {
		t.Run(name, func(t *testing.T) {
			n := nodeOf(t, render(t, c, vals))
			f := n.flags(t)
			if f["resident-memory"] != "auto" {
				return
			}
			limit, ok := n.container.Resources.Limits[corev1.ResourceMemory]
			if !ok || limit.IsZero() {
				t.Fatalf("--resident-memory=auto without a memory limit: the budget would be half of the Kubernetes node's memory")
			}
			if req := n.container.Resources.Requests[corev1.ResourceMemory]; req.Cmp(limit) != 0 {
				t.Errorf("memory request %s != limit %s", req.String(), limit.String())
			}
			t.Logf("memory limit %s: residency budget %d MiB", limit.String(), limit.Value()/2>>20)
		})
	}
}

// TestDashboardConfigMap: the chart's copy of the dashboard is
// deploy/grafana/dashboards/mcpgrain.json, and so is the ConfigMap's data,
// from the chart directory and from the packaged chart (helm package).
func TestDashboardConfigMap(t *testing.T) {
	source := readRepoFile(t, "deploy/grafana/dashboards/mcpgrain.json")
	copyPath := filepath.Join(chartDir, "dashboards", "mcpgrain.json")
	if ok, diff := equalBytes(readRepoFile(t, "deploy/helm/mcpgrain/dashboards/mcpgrain.json"), source); !ok {
		t.Fatalf("%s is not deploy/grafana/dashboards/mcpgrain.json (%s); sync it:\n  cp deploy/grafana/dashboards/mcpgrain.json deploy/helm/mcpgrain/dashboards/", copyPath, diff)
	}
	c := loadChart(t)
	packaged, err := chartutil.Save(c, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pc, err := loader.Load(packaged)
	if err != nil {
		t.Fatal(err)
	}
	vals := withValues(valuesFile(t, ""), map[string]any{"dashboard.enabled": true})
	for what, r := range map[string]rendered{"chart directory": render(t, c, vals), "packaged chart " + filepath.Base(packaged): render(t, pc, vals)} {
		cm := only[*corev1.ConfigMap](t, r)
		if ok, diff := equalBytes([]byte(cm.Data["mcpgrain.json"]), source); !ok {
			t.Errorf("%s: ConfigMap %s data mcpgrain.json is not the dashboard (%s)", what, cm.Name, diff)
		}
		if cm.Labels["grafana_dashboard"] != "1" {
			t.Errorf("%s: ConfigMap %s labels %v: want grafana_dashboard: \"1\" (Grafana's sidecar)", what, cm.Name, cm.Labels)
		}
	}
}

// TestBadValuesFailClearly: settings that cannot work fail the install
// with a message naming the value to fix.
func TestBadValuesFailClearly(t *testing.T) {
	c := loadChart(t)
	defaults := valuesFile(t, "")
	for _, tc := range []struct {
		name string
		set  map[string]any
		want string
	}{
		{"auto budget without a memory limit", map[string]any{"resources.limits.memory": nil}, "set resources.limits.memory"},
		{"no state key", map[string]any{"secrets.stateKey.key": ""}, "secrets.stateKey.key is required"},
		{"no tokens", map[string]any{"secrets.keysFile.key": ""}, "no bearer tokens"},
		{"no store", map[string]any{"secrets.storeDSN.key": ""}, "no store"},
		{"postgres host without a password secret", map[string]any{"postgres.host": "db"}, "postgres.passwordSecret.name"},
		{"cluster TLS on pod IPs", map[string]any{"cluster.tls.enabled": true, "cluster.tls.secretName": "x"}, "use cluster.advertise dns"},
		{"unknown advertise mode", map[string]any{"cluster.advertise": "hostname"}, "cluster.advertise must be podIP or dns"},
		{"no consul", map[string]any{"consul.hostAgent": false}, "consul.address"},
		{"gRPC TLS without a secret", map[string]any{"gateway.grpcTLS.enabled": true}, "gateway.grpcTLS.secretName"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := renderRaw(c, withValues(defaults, tc.set), kubeVersions[0])
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("render: %v, want an error saying %q", err, tc.want)
			}
		})
	}
	if _, err := renderRaw(c, defaults, "v1.29.0"); err == nil {
		t.Errorf("Kubernetes 1.29 accepted: lifecycle.preStop.sleep is off by default there")
	}
}

// TestPodHygiene: what the pod must and must not get from Kubernetes.
func TestPodHygiene(t *testing.T) {
	c := loadChart(t)
	for name, vals := range cases(t) {
		t.Run(name, func(t *testing.T) {
			n := nodeOf(t, render(t, c, vals))
			// A Service named mcpgrain would inject MCPGRAIN_SERVICE_HOST,
			// MCPGRAIN_PORT, ...: the node's configuration namespace.
			if n.pod.EnableServiceLinks == nil || *n.pod.EnableServiceLinks {
				t.Errorf("enableServiceLinks is not false")
			}
			if n.pod.AutomountServiceAccountToken == nil || *n.pod.AutomountServiceAccountToken {
				t.Errorf("the pod mounts a service account token; the node calls no Kubernetes API")
			}
			sc := n.container.SecurityContext
			if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				t.Errorf("the root filesystem is writable")
			}
			tmp := false
			for _, m := range n.container.VolumeMounts {
				tmp = tmp || m.MountPath == "/tmp"
			}
			if !tmp {
				t.Errorf("no writable /tmp under a read-only root")
			}
			if ps := n.pod.SecurityContext; ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot {
				t.Errorf("runAsNonRoot is not set (the image runs as nonroot)")
			}
			if strings.HasSuffix(n.container.Image, ":latest") || !strings.Contains(n.container.Image, ":") && !strings.Contains(n.container.Image, "@sha256:") {
				t.Errorf("image %q: want a pinned tag or digest", n.container.Image)
			}
			if n.sts.Spec.PodManagementPolicy != "Parallel" || n.sts.Spec.UpdateStrategy.Type != "RollingUpdate" {
				t.Errorf("StatefulSet %s: want Parallel pod management and rolling updates", n.sts.Name)
			}
		})
	}
}
