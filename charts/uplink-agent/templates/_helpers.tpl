{{/*
Names. The full name is cut to 40 characters so that every object name built from it
("-inventory", "-cluster", "-node", "-status", "-token", "-console-ca") stays within 63.
*/}}
{{- define "uplink-agent.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 40 | trimSuffix "-" }}
{{- end }}

{{- define "uplink-agent.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Cluster-scoped objects (ClusterRoles and their bindings) carry the namespace in their name:
two releases of the same name in different namespaces must not share or fight over them.
Call with (dict "root" $ "component" "inventory").
*/}}
{{- define "uplink-agent.clusterScopedName" -}}
{{- printf "%s-%s-%s" .root.Release.Namespace (include "uplink-agent.fullname" .root) .component }}
{{- end }}

{{- define "uplink-agent.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "uplink-agent.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: uplink
{{- end }}

{{/* Call with (dict "root" $ "component" "inventory"). */}}
{{- define "uplink-agent.selectorLabels" -}}
app.kubernetes.io/name: {{ include "uplink-agent.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* Call with (dict "root" $ "component" "inventory"). */}}
{{- define "uplink-agent.componentLabels" -}}
{{ include "uplink-agent.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/*
An image reference: REPOSITORY@DIGEST when a digest is set (the tag then says nothing the
digest does not), else REPOSITORY:TAG with the chart's appVersion as the default tag.
Call with (dict "root" $ "repository" R "digest" D).
*/}}
{{- define "uplink-agent.image" -}}
{{- if .digest }}
{{- printf "%s@%s" .repository .digest }}
{{- else }}
{{- printf "%s:%s" .repository (default .root.Chart.AppVersion .root.Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
The first uplink-agent version with the cluster and node roles. kubernetes.enabled with an
older image would start a Deployment and a DaemonSet whose agent has no such role and
crash-loops, so the chart refuses it. The image's version is image.tag (default: the chart's
appVersion); with image.digest set the tag pins nothing but still states the version.
*/}}
{{- define "uplink-agent.kubernetesRolesSince" -}}0.1.0{{- end }}

{{- define "uplink-agent.checkKubernetesImage" -}}
{{- $since := include "uplink-agent.kubernetesRolesSince" . }}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- if not (regexMatch "^v?[0-9]+\\.[0-9]+\\.[0-9]+(-[0-9A-Za-z.-]+)?(\\+[0-9A-Za-z.-]+)?$" $tag) }}
{{- fail (printf "kubernetes.enabled needs uplink-agent %s or later, and image.tag %q is not a version, so the chart cannot tell: set image.tag to the version of the image you install (with image.digest it only states the version)" $since $tag) }}
{{- end }}
{{- /* "-0" lets the release candidates of that version in: they have the roles too. */}}
{{- if not (semverCompare (printf ">=%s-0" $since) $tag) }}
{{- fail (printf "kubernetes.enabled needs uplink-agent %s or later (the first with the cluster and node roles), but image.tag %s names an older agent image: install %s:%s or later (leave image.tag unset for the chart's %s), or set kubernetes.enabled=false for the inventory alone" $since $tag .Values.image.repository .Chart.AppVersion .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/* The console URL, checked: the schema allows "" only so that this message can say what is missing. */}}
{{- define "uplink-agent.consoleUrl" -}}
{{- required "config.baseUrl is required: the console's address, https://HOST[:PORT] (for example --set config.baseUrl=https://console.example.com)" .Values.config.baseUrl | trimSuffix "/" }}
{{- end }}

{{/* The console's TCP port: the one in config.baseUrl, else 443. */}}
{{- define "uplink-agent.consolePort" -}}
{{- $host := (urlParse (include "uplink-agent.consoleUrl" .)).host }}
{{- $port := regexFind ":[0-9]+$" $host | trimPrefix ":" }}
{{- if $port }}{{ $port }}{{ else }}443{{ end }}
{{- end }}

{{/*
Why a pod in the cluster cannot reach config.baseUrl's host, or "" when it may: loopback
(localhost, 127.0.0.0/8, ::1) and unspecified (0.0.0.0, ::) addresses mean the pod itself,
and .local names are multicast DNS, which cluster DNS does not resolve.
*/}}
{{- define "uplink-agent.consoleUnreachableReason" -}}
{{- $host := (urlParse (include "uplink-agent.consoleUrl" .)).hostname | lower | trimSuffix "." }}
{{- if or (eq $host "localhost") (hasSuffix ".localhost" $host) (hasPrefix "127." $host) (hasPrefix "::ffff:127." $host) (eq $host "::1") (eq $host "0:0:0:0:0:0:0:1") }}
{{- printf "%s is a loopback address: in a pod it means the pod itself" $host }}
{{- else if or (eq $host "0.0.0.0") (eq $host "::") }}
{{- printf "%s is the unspecified address, which nothing can connect to" $host }}
{{- else if hasSuffix ".local" $host }}
{{- printf "%s is a multicast DNS (.local) name, which cluster DNS does not resolve" $host }}
{{- end }}
{{- end }}

{{- define "uplink-agent.tokenSecretName" -}}
{{- if .Values.token.existingSecret }}
{{- .Values.token.existingSecret }}
{{- else if .Values.token.value }}
{{- printf "%s-token" (include "uplink-agent.fullname" .) }}
{{- else }}
{{- fail "set token.existingSecret (a Secret holding the connection token under token.secretKey, e.g. one made by 'uplink connections install') or token.value (the agt_ token; the chart then stores it in a Secret)" }}
{{- end }}
{{- end }}

{{/* Where the token file and the console CA bundle are mounted in every agent container. */}}
{{- define "uplink-agent.tokenDir" -}}/var/run/secrets/uplink{{- end }}
{{- define "uplink-agent.caDir" -}}/etc/uplink/console-ca{{- end }}

{{/* Arguments every role takes: the console, the token file and the CA bundle. */}}
{{- define "uplink-agent.consoleArgs" -}}
- --console={{ include "uplink-agent.consoleUrl" . }}
- --token-file={{ include "uplink-agent.tokenDir" . }}/token
{{- if .Values.config.caBundle }}
- --console-ca-file={{ include "uplink-agent.caDir" . }}/ca.crt
{{- end }}
- --log-level={{ .Values.config.logLevel }}
{{- end }}

{{- define "uplink-agent.consoleVolumeMounts" -}}
- name: token
  mountPath: {{ include "uplink-agent.tokenDir" . }}
  readOnly: true
{{- if .Values.config.caBundle }}
- name: console-ca
  mountPath: {{ include "uplink-agent.caDir" . }}
  readOnly: true
{{- end }}
{{- end }}

{{/*
The token is projected under the fixed name "token", readable by the pod's group only (the
pods run with fsGroup 65532); no subPath, so a rotated Secret reaches the running pods.
*/}}
{{- define "uplink-agent.consoleVolumes" -}}
- name: token
  secret:
    secretName: {{ include "uplink-agent.tokenSecretName" . }}
    defaultMode: 0440
    items:
      - key: {{ .Values.token.secretKey }}
        path: token
{{- if .Values.config.caBundle }}
- name: console-ca
  configMap:
    name: {{ include "uplink-agent.fullname" . }}-console-ca
    defaultMode: 0444
{{- end }}
{{- end }}

{{/* The agent's numeric user and group: "nonroot" in the distroless base image. */}}
{{- define "uplink-agent.uid" -}}65532{{- end }}

{{/* Pod security context of the inventory and cluster pods. */}}
{{- define "uplink-agent.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ include "uplink-agent.uid" . }}
runAsGroup: {{ include "uplink-agent.uid" . }}
fsGroup: {{ include "uplink-agent.uid" . }}
fsGroupChangePolicy: OnRootMismatch
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/*
The kubelet creates a missing hostPath directory as root, mode 0755. This init container
makes the agent's spool directory "path" (the mount point or a directory inside it), owned by
the agent (mode 0700): it runs one fixed command as root with only CAP_CHOWN and CAP_FOWNER,
mounts nothing but the spool host path (volume "spool" at "mount"), and exits. Takes
(dict "root" $ "image" IMAGE "mount" DIR "path" DIR), IMAGE being the pod's own image.
*/}}
{{- define "uplink-agent.spoolOwner" -}}
- name: spool-owner
  image: {{ .image | quote }}
  imagePullPolicy: {{ .root.Values.image.pullPolicy }}
  command:
    - /usr/bin/install
    - -d
    - -m
    - "0700"
    - -o
    - {{ include "uplink-agent.uid" .root | quote }}
    - -g
    - {{ include "uplink-agent.uid" .root | quote }}
    - {{ .path }}
  resources:
    requests: {cpu: 10m, memory: 16Mi}
    limits: {cpu: 100m, memory: 32Mi}
  securityContext:
    runAsNonRoot: false
    runAsUser: 0
    runAsGroup: 0
    privileged: false
    allowPrivilegeEscalation: false
    readOnlyRootFilesystem: true
    capabilities:
      drop:
        - ALL
      add:
        - CHOWN
        - FOWNER
    seccompProfile:
      type: RuntimeDefault
  volumeMounts:
    - name: spool
      mountPath: {{ .mount }}
{{- end }}

{{/* Pod security context of a pod whose spool-owner init container runs as root: no
pod-level runAsNonRoot; every agent container sets it itself. */}}
{{- define "uplink-agent.spoolPodSecurityContext" -}}
runAsUser: {{ include "uplink-agent.uid" . }}
runAsGroup: {{ include "uplink-agent.uid" . }}
fsGroup: {{ include "uplink-agent.uid" . }}
fsGroupChangePolicy: OnRootMismatch
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* Security context of every long-running agent container. */}}
{{- define "uplink-agent.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ include "uplink-agent.uid" . }}
runAsGroup: {{ include "uplink-agent.uid" . }}
privileged: false
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop:
    - ALL
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* The health port, its probes and the Prometheus annotations, shared by all roles. */}}
{{- define "uplink-agent.healthPort" -}}8081{{- end }}

{{- define "uplink-agent.probes" -}}
ports:
  - name: http-health
    containerPort: {{ include "uplink-agent.healthPort" . }}
    protocol: TCP
livenessProbe:
  httpGet:
    path: /healthz
    port: http-health
  initialDelaySeconds: 5
  periodSeconds: 20
  timeoutSeconds: 5
  failureThreshold: 3
readinessProbe:
  httpGet:
    path: /readyz
    port: http-health
  periodSeconds: 10
  timeoutSeconds: 5
  failureThreshold: 3
{{- end }}

{{- define "uplink-agent.podAnnotations" -}}
prometheus.io/scrape: "true"
prometheus.io/port: {{ include "uplink-agent.healthPort" . | quote }}
prometheus.io/path: /metrics
{{- if .Values.config.caBundle }}
{{- /* The agent reads the CA bundle when it starts: a new bundle rolls the pods. */}}
checksum/console-ca: {{ .Values.config.caBundle | sha256sum }}
{{- end }}
{{- end }}
