{{/*
Workspace execution (docs/chart.md, "Workspace execution"): the values come from the
execution.json the console writes for a qualified offer (helm upgrade ... -f execution.json).
*/}}

{{/* The checks every execution template makes first; "" or a failure. */}}
{{- define "uplink-agent.execution.check" -}}
{{- $e := .Values.execution }}
{{- if not (semverCompare ">=1.34.0-0 <1.37.0-0" .Capabilities.KubeVersion.Version) }}
{{- fail (printf "execution.enabled needs Kubernetes 1.34 to 1.36 (the workspace controller refuses others), and this cluster is %s" .Capabilities.KubeVersion.Version) }}
{{- end }}
{{- if not (regexMatch "^[a-z0-9][a-z0-9._/:-]*@sha256:[0-9a-f]{64}$" $e.workspaceImage) }}
{{- fail "execution.workspaceImage must be pinned by digest (REPOSITORY@sha256:...): use the execution.json the console wrote for the offer" }}
{{- end }}
{{- if lt (int64 $e.capacityGpus) 1 }}
{{- fail "execution.capacityGpus must be 1 or more: use the execution.json the console wrote for the offer" }}
{{- end }}
{{- if not $e.nodes }}
{{- fail "execution.nodes must name the approved nodes: use the execution.json the console wrote for the offer" }}
{{- end }}
{{- if or (lt (int64 $e.resourcesPerGpu.cpuMillis) 1) (lt (int64 $e.resourcesPerGpu.memoryBytes) 1) (lt (int64 $e.resourcesPerGpu.ephemeralStorageBytes) 1) }}
{{- fail "execution.resourcesPerGpu (cpuMillis, memoryBytes, ephemeralStorageBytes) must be set: the review's figures, in the execution.json the console wrote" }}
{{- end }}
{{- if eq $e.namespace .Release.Namespace }}
{{- fail (printf "execution.namespace (%s) must be a namespace of its own, not the release's: its guards deny every workload that is not a workspace" $e.namespace) }}
{{- end }}
{{- end }}

{{/* The annotation that keeps an object when the release is uninstalled. */}}
{{- define "uplink-agent.execution.keep" -}}
helm.sh/resource-policy: keep
{{- end }}

{{- define "uplink-agent.execution.credentialSecretName" -}}
{{- $c := .Values.execution.credential }}
{{- if $c.existingSecret }}
{{- $c.existingSecret }}
{{- else if $c.value }}
{{- printf "%s-execution" (include "uplink-agent.fullname" .) }}
{{- else }}
{{- fail "set execution.credential.existingSecret (a Secret holding the execution credential under execution.credential.secretKey) or execution.credential.value (the exe_ credential the console showed once)" }}
{{- end }}
{{- end }}

{{/*
The admission policy's CEL, one validation per rule, each admitting only what the controller's
pods are (src/agent/workspace/pod_spec.cc): the pinned image, an approved node, the security
context, no token, no host access, only sized emptyDirs. tests/chart/cel evaluates them.
*/}}
{{- define "uplink-agent.execution.validations" -}}
{{- $e := .Values.execution }}
{{- $nodes := list }}
{{- range $e.nodes }}{{ $nodes = append $nodes (printf "'%s'" .) }}{{ end }}
- expression: "object.spec.containers.all(c, c.image == '{{ $e.workspaceImage }}')"
  message: "only the pinned workspace image {{ $e.workspaceImage }} runs here"
- expression: "(!has(object.spec.initContainers) || size(object.spec.initContainers) == 0) && (!has(object.spec.ephemeralContainers) || size(object.spec.ephemeralContainers) == 0)"
  message: "no init or ephemeral containers"
- expression: "has(object.spec.nodeName) && object.spec.nodeName in [{{ join ", " $nodes }}] && !has(object.spec.nodeSelector) && !has(object.spec.affinity)"
  message: "a workspace runs on an approved node, named by nodeName"
- expression: "has(object.spec.securityContext) && has(object.spec.securityContext.runAsNonRoot) && object.spec.securityContext.runAsNonRoot == true && has(object.spec.securityContext.runAsUser) && object.spec.securityContext.runAsUser == 1000 && has(object.spec.securityContext.runAsGroup) && object.spec.securityContext.runAsGroup == 1000 && has(object.spec.securityContext.seccompProfile) && object.spec.securityContext.seccompProfile.type == 'RuntimeDefault' && !has(object.spec.securityContext.sysctls)"
  message: "the pod runs as UID and GID 1000, non-root, with the RuntimeDefault seccomp profile"
- expression: "object.spec.containers.all(c, has(c.securityContext) && (!has(c.securityContext.privileged) || c.securityContext.privileged == false) && has(c.securityContext.allowPrivilegeEscalation) && c.securityContext.allowPrivilegeEscalation == false && has(c.securityContext.readOnlyRootFilesystem) && c.securityContext.readOnlyRootFilesystem == true && has(c.securityContext.capabilities) && has(c.securityContext.capabilities.drop) && 'ALL' in c.securityContext.capabilities.drop && !has(c.securityContext.capabilities.add) && (!has(c.securityContext.runAsUser) || c.securityContext.runAsUser == 1000) && (!has(c.securityContext.runAsGroup) || c.securityContext.runAsGroup == 1000) && (!has(c.securityContext.runAsNonRoot) || c.securityContext.runAsNonRoot == true) && (!has(c.securityContext.seccompProfile) || c.securityContext.seccompProfile.type == 'RuntimeDefault') && (!has(c.securityContext.procMount) || c.securityContext.procMount == 'Default'))"
  message: "every container is unprivileged: no privilege escalation, all capabilities dropped, a read-only root filesystem"
- expression: "(!has(object.spec.hostNetwork) || object.spec.hostNetwork == false) && (!has(object.spec.hostPID) || object.spec.hostPID == false) && (!has(object.spec.hostIPC) || object.spec.hostIPC == false) && object.spec.containers.all(c, !has(c.ports) || c.ports.all(p, !has(p.hostPort) || p.hostPort == 0))"
  message: "no host network, PID or IPC namespace, and no host ports"
- expression: "!has(object.spec.volumes) || object.spec.volumes.all(v, has(v.emptyDir) && has(v.emptyDir.sizeLimit) && (!has(v.emptyDir.medium) || v.emptyDir.medium == ''))"
  message: "only size-limited emptyDir volumes (no hostPath, token, Secret or claim)"
- expression: "has(object.spec.automountServiceAccountToken) && object.spec.automountServiceAccountToken == false && has(object.spec.enableServiceLinks) && object.spec.enableServiceLinks == false"
  message: "no service account token and no service links"
- expression: "object.spec.containers.all(c, !has(c.envFrom) && (!has(c.env) || c.env.all(e, !has(e.valueFrom))))"
  message: "no environment from Secrets, ConfigMaps or the API"
- expression: "object.spec.containers.all(c, has(c.resources) && has(c.resources.limits) && has(c.resources.requests) && c.resources.requests == c.resources.limits)"
  message: "requests equal limits"
- expression: "has(object.spec.activeDeadlineSeconds) && object.spec.activeDeadlineSeconds <= {{ int64 $e.maxLifetimeSeconds }} && has(object.spec.priorityClassName) && object.spec.priorityClassName == '{{ $e.priorityClassName }}'"
  message: "a deadline within the maximum lifetime, and the workspace priority class"
{{- if $e.runtimeClassName }}
- expression: "has(object.spec.runtimeClassName) && object.spec.runtimeClassName == '{{ $e.runtimeClassName }}'"
  message: "the runtime class {{ $e.runtimeClassName }}"
{{- else }}
- expression: "!has(object.spec.runtimeClassName)"
  message: "no runtime class but the configured one"
{{- end }}
{{- if not $e.hostUsers }}
- expression: "has(object.spec.hostUsers) && object.spec.hostUsers == false"
  message: "a user namespace of its own (hostUsers: false)"
{{- end }}
{{- end }}
