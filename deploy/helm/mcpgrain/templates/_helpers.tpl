{{/*
Names. fullname is the release name when it already contains the chart
name, else <release>-<chart>; both are cut at 63 characters (DNS labels).
*/}}
{{- define "mcpgrain.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "mcpgrain.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The headless Service of the members (StatefulSet serviceName). */}}
{{- define "mcpgrain.clusterService" -}}
{{- printf "%s-cluster" (include "mcpgrain.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The Secret holding the node's secrets unless an item names another. */}}
{{- define "mcpgrain.secretName" -}}
{{- default (printf "%s-secrets" (include "mcpgrain.fullname" .)) .Values.secrets.existingSecret }}
{{- end }}

{{- define "mcpgrain.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "mcpgrain.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "mcpgrain.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mcpgrain.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "mcpgrain.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "mcpgrain.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "mcpgrain.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
The --advertise address: the pod IP from the downward API, or the pod's
name in the headless Service. $(POD_NAME) and $(POD_IP) are expanded by
the kubelet from the container's environment.
*/}}
{{- define "mcpgrain.advertise" -}}
{{- if eq .Values.cluster.advertise "podIP" }}
{{- printf "$(POD_IP):%d" (int .Values.cluster.port) }}
{{- else if eq .Values.cluster.advertise "dns" }}
{{- printf "$(POD_NAME).%s.%s.svc.%s:%d" (include "mcpgrain.clusterService" .) .Release.Namespace .Values.cluster.clusterDomain (int .Values.cluster.port) }}
{{- else }}
{{- fail (printf "cluster.advertise must be podIP or dns, not %q" .Values.cluster.advertise) }}
{{- end }}
{{- end }}

{{/* --public-url: explicit, else https://<first ingress TLS host>. */}}
{{- define "mcpgrain.publicURL" -}}
{{- if .Values.gateway.publicURL }}
{{- .Values.gateway.publicURL }}
{{- else if and .Values.ingress.enabled .Values.ingress.tls }}
{{- with (first .Values.ingress.tls).hosts }}
{{- printf "https://%s" (first .) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The Postgres DSN built from postgres.host (no password: PGPASSWORD
carries it). Empty when the DSN comes whole from a Secret.
*/}}
{{- define "mcpgrain.storeDSN" -}}
{{- with .Values.postgres }}
{{- if .host }}
{{- $params := dict }}
{{- range $k, $v := .params }}{{ $_ := set $params $k (toString $v) }}{{ end }}
{{- if .sslmode }}{{ $_ := set $params "sslmode" .sslmode }}{{ end }}
{{- if .tls.caSecret.name }}{{ $_ := set $params "sslrootcert" "/etc/mcpgrain/postgres/ca.crt" }}{{ end }}
{{- if .tls.clientCertSecret }}{{ $_ := set $params "sslcert" "/etc/mcpgrain/postgres/tls.crt" }}{{ $_ := set $params "sslkey" "/etc/mcpgrain/postgres/tls.key" }}{{ end }}
{{- $query := list }}
{{- range $k := keys $params | sortAlpha }}{{ $query = append $query (printf "%s=%s" (urlquery $k) (urlquery (get $params $k))) }}{{ end }}
{{- printf "postgres://%s@%s:%d/%s" (urlquery .user) .host (int .port) (urlquery .database) }}{{ if $query }}?{{ join "&" $query }}{{ end }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Checks that fail the render with a message naming the value to fix.
*/}}
{{- define "mcpgrain.validate" -}}
{{- if and (eq (toString .Values.node.residentMemory) "auto") (not (dig "limits" "memory" "" .Values.resources)) }}
{{- fail "node.residentMemory auto is half of the container's memory limit: set resources.limits.memory (or a fixed node.residentMemory such as 2GiB)" }}
{{- end }}
{{- if not .Values.secrets.stateKey.key }}
{{- fail "secrets.stateKey.key is required: every member needs the same state key (--state-key-file)" }}
{{- end }}
{{- if and (not .Values.secrets.keysFile.key) (not .Values.secrets.token.key) }}
{{- fail "no bearer tokens: set secrets.keysFile.key (--keys-file) or secrets.token.key (--token-file)" }}
{{- end }}
{{- if and (not .Values.postgres.host) (not .Values.secrets.storeDSN.key) }}
{{- fail "no store: set secrets.storeDSN.key (a Secret holding the Postgres DSN) or postgres.host" }}
{{- end }}
{{- if and .Values.postgres.host (not .Values.postgres.passwordSecret.name) }}
{{- fail "postgres.host is set: name the Secret holding the password in postgres.passwordSecret.name" }}
{{- end }}
{{- if and .Values.cluster.tls.enabled (ne .Values.cluster.advertise "dns") }}
{{- fail "cluster.tls.enabled: the member certificate must name the advertised host; use cluster.advertise dns with a certificate for *.<release>-cluster.<namespace>.svc.<clusterDomain>" }}
{{- end }}
{{- if and .Values.cluster.tls.enabled (not .Values.cluster.tls.secretName) }}
{{- fail "cluster.tls.enabled: set cluster.tls.secretName (tls.crt, tls.key, ca.crt)" }}
{{- end }}
{{- if and .Values.gateway.grpcTLS.enabled (not .Values.gateway.grpcTLS.secretName) }}
{{- fail "gateway.grpcTLS.enabled: set gateway.grpcTLS.secretName (a kubernetes.io/tls Secret)" }}
{{- end }}
{{- if and (not .Values.consul.hostAgent) (not .Values.consul.address) }}
{{- fail "consul: set consul.address (host:port of one Consul agent) or consul.hostAgent true" }}
{{- end }}
{{- if and .Values.secrets.create .Values.secrets.existingSecret }}
{{- fail "secrets.create makes <fullname>-secrets: leave secrets.existingSecret empty with it" }}
{{- end }}
{{- end }}
