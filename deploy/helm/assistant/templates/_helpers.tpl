{{/* Names and labels shared by the templates. */}}
{{- define "assistant.name" -}}
{{- .Release.Name -}}
{{- end -}}

{{- define "assistant.labels" -}}
app.kubernetes.io/name: assistant
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{/* The environment of the assistant's containers: settings from the ConfigMap, secrets from the Secret. */}}
{{- define "assistant.env" -}}
- configMapRef:
    name: {{ .Release.Name }}-config
- secretRef:
    name: {{ .Values.secrets.existingSecret }}
{{- end -}}
