{{/*
Chart name, truncated to the 63 characters Kubernetes allows in a name.
*/}}
{{- define "a2m-gateway.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Fully qualified app name: `<release>-<chart>`, or the release name alone when
it already contains the chart name.
*/}}
{{- define "a2m-gateway.fullname" -}}
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

{{/*
Chart name and version for the helm.sh/chart label.
*/}}
{{- define "a2m-gateway.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Selector labels: stable for the life of a release (Deployment selectors are immutable).
The component label keeps the `helm test` pod out of the Service and the NetworkPolicy.
*/}}
{{- define "a2m-gateway.selectorLabels" -}}
app.kubernetes.io/name: {{ include "a2m-gateway.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: gateway
{{- end }}

{{/*
Common labels, for every resource of the gateway itself.
*/}}
{{- define "a2m-gateway.labels" -}}
helm.sh/chart: {{ include "a2m-gateway.chart" . }}
{{ include "a2m-gateway.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: a2m-gateway
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
Labels for the `helm test` pod: common labels without the gateway's selector.
*/}}
{{- define "a2m-gateway.testLabels" -}}
helm.sh/chart: {{ include "a2m-gateway.chart" . }}
app.kubernetes.io/name: {{ include "a2m-gateway.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: test
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: a2m-gateway
{{ include "a2m-gateway.clientLabel" . }}: "true"
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
The label a pod carries to be let in by the NetworkPolicy when
networkPolicy.ingress.allowSameNamespace is false.
*/}}
{{- define "a2m-gateway.clientLabel" -}}
{{- printf "%s-client" (include "a2m-gateway.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Common annotations (a map rendered under metadata.annotations), or nothing.
*/}}
{{- define "a2m-gateway.annotations" -}}
{{- with .Values.commonAnnotations }}
{{- toYaml . }}
{{- end }}
{{- end }}

{{/*
ServiceAccount the pods run as.
*/}}
{{- define "a2m-gateway.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "a2m-gateway.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
Full image reference; a digest wins over the tag, the tag defaults to appVersion.
*/}}
{{- define "a2m-gateway.image" -}}
{{- $repo := .Values.image.repository -}}
{{- if .Values.image.registry -}}
{{- $repo = printf "%s/%s" .Values.image.registry .Values.image.repository -}}
{{- end -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repo .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (default .Chart.AppVersion .Values.image.tag | toString) -}}
{{- end -}}
{{- end }}

{{/*
Where the config file is mounted; the image's CMD names the same path.
*/}}
{{- define "a2m-gateway.configPath" -}}
/etc/a2m-gateway/config.yaml
{{- end }}

{{/*
The container's arguments after the `a2m-gateway` entrypoint.
*/}}
{{- define "a2m-gateway.args" -}}
- serve
- --config
- {{ include "a2m-gateway.configPath" . }}
- --host
- 0.0.0.0
- --port
- {{ .Values.containerPort | quote }}
{{- end }}

{{/*
The config file as rendered into the ConfigMap (YAML text): `.Values.config`,
with `demoStore` as store "demo" when `config.stores` is empty. Every template
that reads the config goes through this, so they all see the same stores.
*/}}
{{- define "a2m-gateway.configYaml" -}}
{{- $config := deepCopy (.Values.config | default dict) -}}
{{- if not $config.stores -}}
{{- $_ := set $config "stores" (dict "demo" (deepCopy .Values.demoStore)) -}}
{{- /* The demo serves only the packaged public docs: it may listen unauthenticated. */ -}}
{{- $server := deepCopy ($config.server | default dict) -}}
{{- if not $server.auth -}}
{{- $_ := set $server "auth" (dict "allow_unauthenticated_network" true) -}}
{{- end -}}
{{- $_ := set $config "server" $server -}}
{{- end -}}
{{- with .Values.sharedRateLimit -}}
{{- if .enabled -}}
{{- $server := deepCopy ($config.server | default dict) -}}
{{- $rate := deepCopy ($server.rate_limit | default dict) -}}
{{- $redis := dict "url" .url "on_error" .onError "timeout_ms" .timeoutMs -}}
{{- if .passwordSecret.name -}}
{{- $_ := set $redis "password" (printf "${file:%s/%s}" (include "a2m-gateway.rateLimitSecretPath" $) .passwordSecret.key) -}}
{{- end -}}
{{- $_ := set $rate "backend" "redis" -}}
{{- $_ := set $rate "redis" $redis -}}
{{- $_ := set $server "rate_limit" $rate -}}
{{- $_ := set $config "server" $server -}}
{{- end -}}
{{- end -}}
{{- toYaml $config }}
{{- end }}

{{/*
Where the shared rate limit's Redis password Secret is mounted.
*/}}
{{- define "a2m-gateway.rateLimitSecretPath" -}}
/etc/a2m-gateway/ratelimit
{{- end }}

{{/*
Qdrant local-mode paths (absolute `connection.path` of qdrant stores), as a
JSON list without duplicates, in store-name order.
*/}}
{{- define "a2m-gateway.localDataPaths" -}}
{{- $paths := list -}}
{{- $config := include "a2m-gateway.configYaml" . | fromYaml -}}
{{- range $name, $store := ($config.stores | default dict) -}}
{{- if and (kindIs "map" $store) (eq (toString $store.backend) "qdrant") -}}
{{- $conn := $store.connection | default dict -}}
{{- if and (kindIs "map" $conn) (kindIs "string" $conn.path) -}}
{{- if hasPrefix "/" $conn.path -}}
{{- $paths = append $paths (clean $conn.path) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $paths | uniq | toJson -}}
{{- end }}

{{/*
Port of one URL-ish endpoint string: {"url": ..., "default": <port>,
"httpsDefault": <port>}. Accepts `scheme://host:port/path`, `host:port`, and
bracketed IPv6 hosts. Without a port: `httpsDefault` for https (the clients'
own defaults: 443, but 6333 for Qdrant), `default` otherwise.
*/}}
{{- define "a2m-gateway.endpointPort" -}}
{{- $url := toString .url -}}
{{- $hostport := $url -}}
{{- $scheme := "" -}}
{{- if contains "://" $url -}}
{{- $parsed := urlParse $url -}}
{{- $scheme = lower $parsed.scheme -}}
{{- $hostport = $parsed.host -}}
{{- end -}}
{{- $port := regexFind ":[0-9]+$" $hostport | trimPrefix ":" -}}
{{- if $port -}}
{{- $port -}}
{{- else if eq $scheme "https" -}}
{{- .httpsDefault | default "443" -}}
{{- else -}}
{{- .default -}}
{{- end -}}
{{- end }}

{{/*
Every remote endpoint the gateway calls, as a JSON list of TCP ports (ints,
sorted, unique): engine hosts/url, Elastic Cloud (443), an OpenAI-compatible
embedder url, and AWS STS/OpenSearch (443) for SigV4. Empty when every store
is a Qdrant local-mode store.
*/}}
{{- define "a2m-gateway.enginePorts" -}}
{{- $ports := list -}}
{{- $config := include "a2m-gateway.configYaml" . | fromYaml -}}
{{- range $name, $store := ($config.stores | default dict) -}}
{{- if kindIs "map" $store -}}
{{- $backend := toString $store.backend -}}
{{- $conn := $store.connection | default dict -}}
{{- if kindIs "map" $conn -}}
{{- $default := ternary "6333" (ternary "9200" "80" (eq $backend "opensearch")) (eq $backend "qdrant") -}}
{{- $httpsDefault := ternary "6333" "443" (eq $backend "qdrant") -}}
{{- if kindIs "slice" $conn.hosts -}}
{{- range $conn.hosts -}}
{{- $ports = append $ports (include "a2m-gateway.endpointPort" (dict "url" . "default" $default "httpsDefault" $httpsDefault)) -}}
{{- end -}}
{{- end -}}
{{- if $conn.url -}}
{{- $ports = append $ports (include "a2m-gateway.endpointPort" (dict "url" $conn.url "default" $default "httpsDefault" $httpsDefault)) -}}
{{- end -}}
{{- if or $conn.cloud_id $conn.aws_sigv4 -}}
{{- $ports = append $ports "443" -}}
{{- end -}}
{{- end -}}
{{- $search := $store.search | default dict -}}
{{- if kindIs "map" $search -}}
{{- $embedder := $search.embedder | default dict -}}
{{- if and (kindIs "map" $embedder) $embedder.url -}}
{{- $ports = append $ports (include "a2m-gateway.endpointPort" (dict "url" $embedder.url "default" "80")) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if .Values.sharedRateLimit.enabled -}}
{{- $ports = append $ports (include "a2m-gateway.endpointPort" (dict "url" .Values.sharedRateLimit.url "default" "6379" "httpsDefault" "6379")) -}}
{{- end -}}
{{- $ints := list -}}
{{- range ($ports | uniq | sortAlpha) -}}
{{- $ints = append $ints (atoi .) -}}
{{- end -}}
{{- $ints | toJson -}}
{{- end }}

{{/*
Paths (dotted) inside `config` that hold an inline credential: a value under a
credential-like key (api_key, password, token, secret, cloud_id, ...) that is
not a whole `${ENV}` / `${file:/path}` reference, or a URL with user:password@.
Called with {"path": ..., "value": ...}; emits one path per line.
*/}}
{{- define "a2m-gateway.inlineSecretPaths" -}}
{{- $path := .path -}}
{{- if kindIs "map" .value -}}
{{- range $key, $v := .value -}}
{{- $p := printf "%s.%s" $path $key -}}
{{- $credentialKey := regexMatch "(?i)^(.*[_-])?(api[_-]?key|apikey|password|passwd|secret|token|secret[_-]access[_-]key|private[_-]key|cloud[_-]id|credentials?)$" (toString $key) -}}
{{- if and $credentialKey (not (kindIs "map" $v)) (not (kindIs "slice" $v)) (not (kindIs "invalid" $v)) -}}
{{- $s := toString $v -}}
{{- if and (ne $s "") (not (regexMatch "^\\$\\{[^}]+\\}$" $s)) -}}
{{- printf "%s\n" $p -}}
{{- end -}}
{{- end -}}
{{- include "a2m-gateway.inlineSecretPaths" (dict "path" $p "value" $v) -}}
{{- end -}}
{{- else if kindIs "slice" .value -}}
{{- range $i, $v := .value -}}
{{- include "a2m-gateway.inlineSecretPaths" (dict "path" (printf "%s[%d]" $path $i) "value" $v) -}}
{{- end -}}
{{- else if kindIs "string" .value -}}
{{- if regexMatch "^[A-Za-z][A-Za-z0-9+.-]*://[^/@\\s]+@" .value -}}
{{- printf "%s (user:password in a URL)\n" $path -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/*
"true" when a value is set: neither null/absent nor the empty string (the
chart's convention for "unset" on optional numbers, e.g. pdb.minAvailable).
*/}}
{{- define "a2m-gateway.isSet" -}}
{{- if and (not (kindIs "invalid" .)) (ne (toString .) "") -}}
true
{{- end -}}
{{- end }}

{{/*
Fail with a readable message when values are inconsistent. Each check adds a
line; all problems are reported at once.
*/}}
{{- define "a2m-gateway.validateValues" -}}
{{- $messages := list -}}
{{- $config := include "a2m-gateway.configYaml" . | fromYaml -}}
{{- if hasKey $config "Error" -}}
{{- $messages = append $messages (printf "config: cannot be rendered as YAML: %s" $config.Error) -}}
{{- end -}}

{{- /* Credentials belong in existingSecret, never in values (they would land in a ConfigMap). */ -}}
{{- $leaks := include "a2m-gateway.inlineSecretPaths" (dict "path" "config" "value" $config) | trim -}}
{{- if $leaks -}}
{{- range (splitList "\n" $leaks) -}}
{{- $messages = append $messages (printf "%s: holds an inline credential. Put the value in the Secret named by existingSecret and reference it as ${file:%s/<key>} (or ${ENV} via secretEnv); values end up in a ConfigMap." . $.Values.secretMountPath) -}}
{{- end -}}
{{- end -}}

{{- /* The pod listens on its network: the gateway refuses that without authentication. */ -}}
{{- $auth := (($config.server | default dict).auth | default dict) -}}
{{- if not (or $auth.api_keys $auth.api_keys_file $auth.jwt $auth.allow_unauthenticated_network) -}}
{{- $messages = append $messages "config.server.auth: the gateway listens on the pod network and refuses to start without authentication. Set api_keys_file (a file from existingSecret) or jwt, or allow_unauthenticated_network: true only if a proxy in front authenticates every caller (see SECURITY.md)." -}}
{{- end -}}

{{- if and .Values.tests.apiKeySecretKey (not .Values.existingSecret) -}}
{{- $messages = append $messages "tests.apiKeySecretKey: names a key of existingSecret, which is not set." -}}
{{- end -}}

{{- /* Every ${...} reference in config must be satisfiable in the pod. */ -}}
{{- $configText := toYaml $config -}}
{{- $envNames := list -}}
{{- range .Values.secretEnv -}}
{{- $envNames = append $envNames .name -}}
{{- end -}}
{{- range .Values.extraEnv -}}
{{- $envNames = append $envNames .name -}}
{{- end -}}
{{- range (regexFindAll "\\$\\{[^}]+\\}" $configText -1 | uniq) -}}
{{- $ref := . | trimPrefix "${" | trimSuffix "}" | trim -}}
{{- if hasPrefix "file:" $ref -}}
{{- $file := $ref | trimPrefix "file:" | trim -}}
{{- if and (hasPrefix (printf "%s/" (clean $.Values.secretMountPath)) $file) (not $.Values.existingSecret) -}}
{{- $messages = append $messages (printf "config: references %s but existingSecret is not set; create the Secret and set existingSecret to its name." $file) -}}
{{- end -}}
{{- else if not (has $ref $envNames) -}}
{{- $messages = append $messages (printf "config: references ${%s} but no secretEnv or extraEnv entry defines %s." $ref $ref) -}}
{{- end -}}
{{- end -}}

{{- with .Values.sharedRateLimit -}}
{{- if and .enabled (not .url) -}}
{{- $messages = append $messages "sharedRateLimit.url: set the redis:// URL of the existing Redis or Valkey (the chart does not install one)." -}}
{{- end -}}
{{- if and .enabled (not (($config.server | default dict).rate_limit | default dict).requests_per_second) -}}
{{- $messages = append $messages "sharedRateLimit: set config.server.rate_limit.requests_per_second (and burst): the quota the replicas share." -}}
{{- end -}}
{{- end -}}

{{- if and .Values.secretEnv (not .Values.existingSecret) -}}
{{- $messages = append $messages "secretEnv: needs existingSecret (the Secret its keys come from)." -}}
{{- end -}}

{{- /* Shutdown must fit in the pod's grace period, or in-flight requests are cut. */ -}}
{{- $server := $config.server | default dict -}}
{{- $grace := 20.0 -}}
{{- if hasKey $server "shutdown_grace_s" -}}
{{- $grace = float64 $server.shutdown_grace_s -}}
{{- end -}}
{{- $needed := addf $grace (float64 .Values.preStopSleepSeconds) -}}
{{- if le (float64 .Values.terminationGracePeriodSeconds) $needed -}}
{{- $messages = append $messages (printf "terminationGracePeriodSeconds (%v) must exceed preStopSleepSeconds (%v) + config.server.shutdown_grace_s (%v)." .Values.terminationGracePeriodSeconds .Values.preStopSleepSeconds $grace) -}}
{{- end -}}

{{- /* The NetworkPolicy denies all other egress: it must know where the engines are. */ -}}
{{- if .Values.networkPolicy.enabled -}}
{{- $ports := include "a2m-gateway.enginePorts" . | fromJsonArray -}}
{{- if and $ports (not .Values.networkPolicy.egress.engines) (not .Values.networkPolicy.egress.extraTo) -}}
{{- $messages = append $messages (printf "networkPolicy.egress.engines: the stores call remote endpoints (ports %s) but no egress destination is set. List the engines' CIDRs or namespace/pod selectors, e.g. [{cidr: 10.0.0.0/16}], or set networkPolicy.enabled=false." (join ", " $ports)) -}}
{{- end -}}
{{- range $i, $rule := .Values.networkPolicy.egress.engines -}}
{{- if not (or $rule.cidr $rule.namespaceSelector $rule.podSelector) -}}
{{- $messages = append $messages (printf "networkPolicy.egress.engines[%d]: set cidr, namespaceSelector or podSelector." $i) -}}
{{- end -}}
{{- if and $rule.cidr (or $rule.namespaceSelector $rule.podSelector) -}}
{{- $messages = append $messages (printf "networkPolicy.egress.engines[%d]: cidr cannot be combined with namespaceSelector/podSelector; use two entries." $i) -}}
{{- end -}}
{{- if and (not $rule.ports) (not $ports) -}}
{{- $messages = append $messages (printf "networkPolicy.egress.engines[%d]: no ports given and none can be derived from config.stores; set ports." $i) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- $minAvailable := include "a2m-gateway.isSet" .Values.pdb.minAvailable -}}
{{- $maxUnavailable := include "a2m-gateway.isSet" .Values.pdb.maxUnavailable -}}
{{- if and .Values.pdb.create $minAvailable $maxUnavailable -}}
{{- $messages = append $messages "pdb: set either minAvailable or maxUnavailable, not both (set the other to \"\")." -}}
{{- end -}}
{{- if and .Values.pdb.create (not $minAvailable) (not $maxUnavailable) -}}
{{- $messages = append $messages "pdb: set minAvailable or maxUnavailable (or pdb.create=false)." -}}
{{- end -}}

{{- if and .Values.autoscaling.enabled (gt (int .Values.autoscaling.minReplicas) (int .Values.autoscaling.maxReplicas)) -}}
{{- $messages = append $messages "autoscaling: minReplicas must not exceed maxReplicas." -}}
{{- end -}}

{{- $cpuTarget := include "a2m-gateway.isSet" .Values.autoscaling.targetCPUUtilizationPercentage -}}
{{- $memoryTarget := include "a2m-gateway.isSet" .Values.autoscaling.targetMemoryUtilizationPercentage -}}
{{- if and .Values.autoscaling.enabled (not $cpuTarget) (not $memoryTarget) -}}
{{- $messages = append $messages "autoscaling: set targetCPUUtilizationPercentage and/or targetMemoryUtilizationPercentage." -}}
{{- end -}}
{{- $requests := dig "requests" dict (.Values.resources | default dict) -}}
{{- if and .Values.autoscaling.enabled $cpuTarget (not $requests.cpu) -}}
{{- $messages = append $messages "autoscaling.targetCPUUtilizationPercentage needs resources.requests.cpu (utilization is relative to the request)." -}}
{{- end -}}
{{- if and .Values.autoscaling.enabled $memoryTarget (not $requests.memory) -}}
{{- $messages = append $messages "autoscaling.targetMemoryUtilizationPercentage needs resources.requests.memory (utilization is relative to the request)." -}}
{{- end -}}

{{- if $messages -}}
{{- printf "\n\nVALUES VALIDATION:\n- %s" (join "\n- " $messages) | fail -}}
{{- end -}}
{{- end }}
