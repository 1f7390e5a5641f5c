{{- define "portal.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "portal.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "portal.selectorLabels" -}}
app.kubernetes.io/name: {{ include "portal.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "portal.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "portal.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "portal.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "portal.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "portal.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The container's environment: PORTAL_* settings (cmd/portal/config.go). */}}
{{- define "portal.env" -}}
- name: PORTAL_LISTEN
  value: "0.0.0.0:8080"
- name: PORTAL_OPS_LISTEN
  value: "0.0.0.0:{{ .Values.metrics.port }}"
- name: PORTAL_LOG_FORMAT
  value: json
- name: PORTAL_BASE_URL
  value: {{ required "baseURL is required" .Values.baseURL | quote }}
- name: PORTAL_DB
  valueFrom:
    secretKeyRef:
      name: {{ required "database.secretName is required" .Values.database.secretName }}
      key: {{ .Values.database.key }}
- name: PORTAL_OIDC_ISSUER
  value: {{ required "oidc.issuer is required" .Values.oidc.issuer | quote }}
- name: PORTAL_OIDC_CLIENT_ID
  value: {{ required "oidc.clientID is required" .Values.oidc.clientID | quote }}
- name: PORTAL_OIDC_CLIENT_SECRET_FILE
  value: /var/run/portal/oidc/{{ .Values.oidc.clientSecret.key }}
- name: PORTAL_OIDC_SCOPES
  value: {{ .Values.oidc.scopes | quote }}
- name: PORTAL_OIDC_GROUPS_CLAIM
  value: {{ .Values.oidc.groupsClaim | quote }}
- name: PORTAL_SESSION_KEY_FILE
  value: /var/run/portal/session/{{ .Values.sessionKey.key }}
- name: PORTAL_GROUPS_FILE
  value: /etc/portal/groups.yaml
{{- if .Values.clusterSettings }}
- name: PORTAL_CLUSTER_SETTINGS
  value: /etc/portal/cluster-settings.yaml
{{- end }}
{{- if .Values.awsSettings }}
- name: PORTAL_AWS_SETTINGS
  value: /etc/portal/aws-settings.yaml
{{- end }}
{{- if .Values.rateCard }}
- name: PORTAL_RATE_CARD
  value: /etc/portal/rate-card.json
{{- end }}
{{- if .Values.provisioner.enabled }}
- name: PORTAL_KUBECONFIG
  value: in-cluster
{{- end }}
{{- range $k, $v := .Values.settings }}
{{- if $v }}
- name: {{ $k }}
  value: {{ $v | quote }}
{{- end }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "portal.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "portal.volumeMounts" -}}
- name: config
  mountPath: /etc/portal
  readOnly: true
- name: oidc
  mountPath: /var/run/portal/oidc
  readOnly: true
- name: session
  mountPath: /var/run/portal/session
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- end -}}
