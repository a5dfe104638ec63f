{{/* The release's full name, at most 63 characters. */}}
{{- define "uring-redis-operator.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "uring-redis-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/part-of: uring-redis-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one component (operator, seccomp-installer, local-static-provisioner). */}}
{{- define "uring-redis-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ .component }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end -}}

{{- define "uring-redis-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "uring-redis-operator.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
An image reference <registry>/<repository>:<tag>[@<digest>] from a values image (.image: registry, repository, tag,
digest), the global registry and .defaultTag for an empty tag.
*/}}
{{- define "uring-redis-operator.imageRef" -}}
{{- $registry := default .root.Values.global.imageRegistry .image.registry | trimSuffix "/" -}}
{{- $ref := .image.repository -}}
{{- if $registry -}}
{{- $ref = printf "%s/%s" $registry $ref -}}
{{- end -}}
{{- with default .defaultTag .image.tag -}}
{{- $ref = printf "%s:%s" $ref . -}}
{{- end -}}
{{- if .image.digest -}}
{{- $ref = printf "%s@%s" $ref .image.digest -}}
{{- end -}}
{{- $ref -}}
{{- end -}}

{{- define "uring-redis-operator.operatorImage" -}}
{{- include "uring-redis-operator.imageRef" (dict "root" . "image" .Values.image "defaultTag" .Chart.AppVersion) -}}
{{- end -}}

{{/* The server image: tagged with the Valkey version it builds and the release (8.1.1-uring0.2.0). */}}
{{- define "uring-redis-operator.redisImage" -}}
{{- $tag := printf "%s-uring%s" (index .Chart.Annotations "uringredis.io/valkey-version") .Chart.AppVersion -}}
{{- include "uring-redis-operator.imageRef" (dict "root" . "image" .Values.redisImage "defaultTag" $tag) -}}
{{- end -}}

{{- define "uring-redis-operator.benchImage" -}}
{{- include "uring-redis-operator.imageRef" (dict "root" . "image" .Values.benchImage "defaultTag" .Chart.AppVersion) -}}
{{- end -}}

{{/* Name of the Security Profiles Operator SeccompProfile. */}}
{{- define "uring-redis-operator.spoProfileName" -}}
{{- printf "%s-io-uring" (include "uring-redis-operator.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The Localhost seccomp profile of uring pods, relative to the kubelet's seccomp directory. */}}
{{- define "uring-redis-operator.uringSeccompProfile" -}}
{{- if eq .Values.seccomp.provider "spo" -}}
{{- default (printf "operator/%s.json" (include "uring-redis-operator.spoProfileName" .)) .Values.seccomp.spo.localhostProfile -}}
{{- else -}}
{{- .Values.seccomp.localhostProfile -}}
{{- end -}}
{{- end -}}

{{/*
True when the release runs node agents (the seccomp installer, the local-nvme provisioner): pods that mount node
directories as root or run privileged, which no Pod Security level below `privileged` admits.
*/}}
{{- define "uring-redis-operator.hasNodeAgents" -}}
{{- $class := .Values.storageClasses.localNvme -}}
{{- if or (eq .Values.seccomp.provider "installer") (and $class.create $class.provisioner.enabled) -}}true{{- end -}}
{{- end -}}

{{/*
The namespace of the node agents: podSecurity.nodeAgents.namespace, else <release namespace>-node. Read with dig, as
is createNamespace: `helm upgrade --reuse-values` from a chart without these values renders with that chart's defaults.
*/}}
{{- define "uring-redis-operator.nodeAgentsNamespace" -}}
{{- default (printf "%s-node" (default "default" .Release.Namespace) | trunc 63 | trimSuffix "-") (dig "podSecurity" "nodeAgents" "namespace" "" .Values.AsMap) -}}
{{- end -}}

{{/* True when the chart creates the node agents' namespace (podSecurity.nodeAgents.createNamespace). */}}
{{- define "uring-redis-operator.createNodeAgentsNamespace" -}}
{{- if dig "podSecurity" "nodeAgents" "createNamespace" true .Values.AsMap -}}true{{- end -}}
{{- end -}}

{{/* True when the cluster serves the Prometheus Operator's monitoring.coreos.com/v1 kind given as .kind. */}}
{{- define "uring-redis-operator.hasMonitoringKind" -}}
{{- if .root.Capabilities.APIVersions.Has (printf "monitoring.coreos.com/v1/%s" .kind) -}}true{{- end -}}
{{- end -}}

{{/*
Checks what the schema cannot: fails once, listing every problem.
*/}}
{{- define "uring-redis-operator.validateValues" -}}
{{- $errors := list -}}
{{- $profile := .Values.seccomp.localhostProfile -}}
{{- if or (hasPrefix "/" $profile) (contains ".." $profile) (not (contains "/" $profile)) -}}
{{- $errors = append $errors (printf "seccomp.localhostProfile %q must be a relative path of the form <directory>/<file> inside the kubelet's seccomp directory" $profile) -}}
{{- end -}}
{{- if not (hasPrefix "/" .Values.seccomp.installer.kubeletDir) -}}
{{- $errors = append $errors (printf "seccomp.installer.kubeletDir %q must be an absolute path" .Values.seccomp.installer.kubeletDir) -}}
{{- end -}}
{{- if and (eq .Values.seccomp.provider "spo") (not (.Capabilities.APIVersions.Has "security-profiles-operator.x-k8s.io/v1beta1/SeccompProfile")) -}}
{{- $errors = append $errors "seccomp.provider=spo needs the Security Profiles Operator (security-profiles-operator.x-k8s.io/v1beta1 SeccompProfile is not served); install it first or use seccomp.provider=installer" -}}
{{- end -}}
{{- if and .Values.storageClasses.gp3.create (or (lt (int .Values.storageClasses.gp3.iops) 3000) (gt (int .Values.storageClasses.gp3.iops) 16000)) -}}
{{- $errors = append $errors (printf "storageClasses.gp3.iops %v must be between 3000 and 16000" .Values.storageClasses.gp3.iops) -}}
{{- end -}}
{{- if and .Values.storageClasses.gp3.create (or (lt (int .Values.storageClasses.gp3.throughput) 125) (gt (int .Values.storageClasses.gp3.throughput) 1000)) -}}
{{- $errors = append $errors (printf "storageClasses.gp3.throughput %v must be between 125 and 1000 MiB/s" .Values.storageClasses.gp3.throughput) -}}
{{- end -}}
{{- if and .Values.storageClasses.localNvme.create .Values.storageClasses.localNvme.provisioner.enabled (not (hasPrefix "/" .Values.storageClasses.localNvme.provisioner.discoveryDir)) -}}
{{- $errors = append $errors (printf "storageClasses.localNvme.provisioner.discoveryDir %q must be an absolute path" .Values.storageClasses.localNvme.provisioner.discoveryDir) -}}
{{- end -}}
{{- if lt (int .Values.maxConcurrentReconciles) 1 -}}
{{- $errors = append $errors (printf "maxConcurrentReconciles %v must be at least 1" .Values.maxConcurrentReconciles) -}}
{{- end -}}
{{- if lt (int .Values.maxConcurrentUpgrades) 1 -}}
{{- $errors = append $errors (printf "maxConcurrentUpgrades %v must be at least 1" .Values.maxConcurrentUpgrades) -}}
{{- end -}}
{{- if and (or .Values.prometheus.serviceMonitor.enabled .Values.prometheus.prometheusRule.enabled) (not .Values.prometheus.enabled) -}}
{{- $errors = append $errors "prometheus.serviceMonitor and prometheus.prometheusRule need prometheus.enabled" -}}
{{- end -}}
{{- $unregistered := list -}}
{{- range $name, $image := dict "image" .Values.image "redisImage" .Values.redisImage "benchImage" .Values.benchImage -}}
{{- if not (or $image.registry $.Values.global.imageRegistry) -}}
{{- $unregistered = append $unregistered $name -}}
{{- end -}}
{{- end -}}
{{- if $unregistered -}}
{{- $errors = append $errors (printf "global.imageRegistry is empty and %s name no registry of their own: the chart in git points at no published image; install a packaged release (helm install <release> oci://<registry>/charts/uring-redis-operator --version <version>) or set global.imageRegistry to the registry `make release` pushed to" (join ", " $unregistered)) -}}
{{- end -}}
{{- if not (or .Values.exporterImage.tag .Values.exporterImage.digest) -}}
{{- $errors = append $errors "exporterImage needs a tag or a digest" -}}
{{- end -}}
{{- if include "uring-redis-operator.hasNodeAgents" . -}}
{{- $agents := include "uring-redis-operator.nodeAgentsNamespace" . -}}
{{- if and (include "uring-redis-operator.createNodeAgentsNamespace" .) (eq $agents .Release.Namespace) -}}
{{- $errors = append $errors (printf "podSecurity.nodeAgents.namespace %q is the release namespace, which the chart cannot create: set podSecurity.nodeAgents.createNamespace=false to run the node agents there (it must then admit privileged pods)" $agents) -}}
{{- end -}}
{{- if and (include "uring-redis-operator.createNodeAgentsNamespace" .) .Values.global.imagePullSecrets -}}
{{- $errors = append $errors (printf "global.imagePullSecrets name Secrets that the node agents' namespace %q, created by the chart, cannot hold before the install: create a namespace labelled pod-security.kubernetes.io/enforce=privileged with those Secrets, and set podSecurity.nodeAgents.createNamespace=false and podSecurity.nodeAgents.namespace to it" $agents) -}}
{{- end -}}
{{- if not (include "uring-redis-operator.createNodeAgentsNamespace" .) -}}
{{- $level := "" -}}
{{- with lookup "v1" "Namespace" "" $agents -}}
{{- $level = index (default (dict) .metadata.labels) "pod-security.kubernetes.io/enforce" | default "" -}}
{{- end -}}
{{- if or (eq $level "baseline") (eq $level "restricted") -}}
{{- $errors = append $errors (printf "namespace %q enforces the Pod Security level %q, which refuses the node agents (the seccomp installer mounts a node directory, the local-nvme provisioner is privileged): label it pod-security.kubernetes.io/enforce=privileged, or leave podSecurity.nodeAgents.createNamespace true" $agents $level) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- range $i, $ns := .Values.watchNamespaces -}}
{{- if not (and (kindIs "string" $ns) (le (len $ns) 63) (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" $ns)) -}}
{{- $errors = append $errors (printf "watchNamespaces[%d] %q is not a namespace name: at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit" $i (toString $ns)) -}}
{{- else if has $ns (slice $.Values.watchNamespaces 0 $i) -}}
{{- $errors = append $errors (printf "watchNamespaces[%d] %q is already listed: name each namespace once" $i $ns) -}}
{{- end -}}
{{- end -}}
{{- range $i, $secret := .Values.global.imagePullSecrets -}}
{{- if not (and (kindIs "map" $secret) $secret.name) -}}
{{- $errors = append $errors (printf "global.imagePullSecrets[%d] %v must be a map with a name: [{name: <secret>}]" $i $secret) -}}
{{- end -}}
{{- end -}}
{{- if $errors -}}
{{- fail (printf "\n\ninvalid values:\n  - %s\n" (join "\n  - " $errors)) -}}
{{- end -}}
{{- end -}}

{{- /* labelList writes a label map as the operator's k=v,k=v flags take it, sorted. */}}
{{- define "uring-redis-operator.labelList" -}}
{{- $pairs := list -}}
{{- range $k, $v := . -}}
{{- $pairs = append $pairs (printf "%s=%s" $k $v) -}}
{{- end -}}
{{- join "," $pairs -}}
{{- end -}}

{{- /* metricsPort is the operator's metrics port: 8443 over HTTPS, 8080 plain. */}}
{{- define "uring-redis-operator.metricsPort" -}}
{{- if .Values.prometheus.secureMetrics }}8443{{ else }}8080{{ end -}}
{{- end -}}
