{{/*
The experiments role (templates/experiments.yaml). A scanner runs when config turns it on and
experiments.* says where to look; the Deployment is installed when one does.
*/}}
{{- define "uplink-agent.experiments.mlflowOn" -}}
{{- $m := .Values.experiments.mlflow }}
{{- if and .Values.config.enableMlflow (or $m.trackingUri $m.volume.persistentVolumeClaim $m.volume.hostPath) }}true{{ end }}
{{- end }}

{{- define "uplink-agent.experiments.wandbOn" -}}
{{- $w := .Values.experiments.wandb }}
{{- if and .Values.config.enableWandb (or $w.volume.persistentVolumeClaim $w.volume.hostPath) }}true{{ end }}
{{- end }}

{{- define "uplink-agent.experiments.enabled" -}}
{{- if or (include "uplink-agent.experiments.mlflowOn" .) (include "uplink-agent.experiments.wandbOn" .) }}true{{ end }}
{{- end }}

{{/* A scanned volume, read-only. Call with (dict "name" N "volume" V). */}}
{{- define "uplink-agent.experiments.scanVolume" -}}
- name: {{ .name }}
{{- if and .volume.persistentVolumeClaim .volume.hostPath }}
{{- fail (printf "experiments: give %s a persistentVolumeClaim or a hostPath, not both" .name) }}
{{- else if .volume.persistentVolumeClaim }}
  persistentVolumeClaim:
    claimName: {{ .volume.persistentVolumeClaim }}
    readOnly: true
{{- else }}
  hostPath:
    path: {{ .volume.hostPath }}
    type: Directory
{{- end }}
{{- end }}

{{/* Where a scanned volume's folder is: its mount, then subPath. Call with (dict "mount" M "volume" V). */}}
{{- define "uplink-agent.experiments.scanDir" -}}
{{- if has ".." (splitList "/" .volume.subPath) }}
{{- fail (printf "experiments: subPath %q leaves its volume (..); name a folder inside it" .volume.subPath) }}
{{- end }}
{{- if .volume.subPath }}{{ printf "%s/%s" .mount (trimPrefix "/" .volume.subPath) }}{{ else }}{{ .mount }}{{ end }}
{{- end }}

{{/* The MLflow tracking server's TCP port: the one in its URI, else 443 for https and 80. */}}
{{- define "uplink-agent.experiments.mlflowPort" -}}
{{- $url := urlParse .Values.experiments.mlflow.trackingUri }}
{{- $port := regexFind ":[0-9]+$" $url.host | trimPrefix ":" }}
{{- if $port }}{{ $port }}{{ else if eq $url.scheme "https" }}443{{ else }}80{{ end }}
{{- end }}
