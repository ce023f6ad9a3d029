{{/* Names, labels and the webhook certificate shared by the templates. */}}

{{- define "linkerd-multus.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "linkerd-multus.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "linkerd-multus.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "linkerd-multus.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels: stable across upgrades (a Deployment's selector is immutable). */}}
{{- define "linkerd-multus.selectorLabels" -}}
app.kubernetes.io/name: {{ include "linkerd-multus.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "linkerd-multus.serviceAccountName" -}}
{{- default (include "linkerd-multus.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "linkerd-multus.webhookServiceName" -}}
{{- printf "%s-webhook" (include "linkerd-multus.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "linkerd-multus.certSecretName" -}}
{{- default (printf "%s-webhook-cert" (include "linkerd-multus.fullname" .)) .Values.webhook.certs.secretName -}}
{{- end -}}

{{- define "linkerd-multus.leaseName" -}}
{{- .Values.operator.leaseName -}}
{{- end -}}

{{- define "linkerd-multus.image" -}}
{{- printf "%s:%s" .image.repository (default .root.Chart.AppVersion .image.tag) -}}
{{- end -}}

{{/*
The helm-mode certificate: generated once, then read back from the existing Secret on every upgrade (so
neither the CA nor the pod changes). Computed once per render and stored on the root context, so the Secret
and the webhook's caBundle always carry the same CA. `helm template` has no cluster: lookup is empty there
and a fresh certificate is generated on each run.
*/}}
{{- define "linkerd-multus.helmCerts" -}}
{{- if not (hasKey $ "linkerdMultusHelmCerts") -}}
{{- $secretName := include "linkerd-multus.certSecretName" . -}}
{{- $existing := lookup "v1" "Secret" .Release.Namespace $secretName -}}
{{- $data := dict -}}
{{- if $existing -}}{{- $data = default (dict) $existing.data -}}{{- end -}}
{{- if and (hasKey $data "ca.crt") (hasKey $data "tls.crt") (hasKey $data "tls.key") -}}
{{- $_ := set $ "linkerdMultusHelmCerts" (dict "ca" (index $data "ca.crt") "crt" (index $data "tls.crt") "key" (index $data "tls.key")) -}}
{{- else -}}
{{- $svc := include "linkerd-multus.webhookServiceName" . -}}
{{- $ns := .Release.Namespace -}}
{{- $days := int .Values.webhook.certs.helm.validityDays -}}
{{- $ca := genCA (printf "%s-ca" (include "linkerd-multus.fullname" .)) $days -}}
{{- $dns := list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns) -}}
{{- $cert := genSignedCert (printf "%s.%s.svc" $svc $ns) nil $dns $days $ca -}}
{{- $_ := set $ "linkerdMultusHelmCerts" (dict "ca" ($ca.Cert | b64enc) "crt" ($cert.Cert | b64enc) "key" ($cert.Key | b64enc)) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The serving Certificate's name in certManager mode (the webhook's CA is injected from it). */}}
{{- define "linkerd-multus.certManagerCertName" -}}
{{- printf "%s-webhook" (include "linkerd-multus.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Values that must agree with each other; a mismatch would install something that cannot work. */}}
{{- define "linkerd-multus.validate" -}}
{{- if and .Values.cni.enabled (ne .Values.operator.cniKubeconfig (printf "%s/%s" (trimSuffix "/" .Values.cni.destCNINetDir) .Values.cni.kubeconfigName)) -}}
{{- fail (printf "operator.cniKubeconfig (%s) must be cni.destCNINetDir/cni.kubeconfigName (%s/%s) when cni.enabled: the NADs would point at a kubeconfig the installer never writes" .Values.operator.cniKubeconfig .Values.cni.destCNINetDir .Values.cni.kubeconfigName) -}}
{{- end -}}
{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElect) -}}
{{- fail "replicas > 1 needs leaderElect=true: several replicas would write the same NADs" -}}
{{- end -}}
{{- if eq .Values.operator.linkerdNamespace .Release.Namespace -}}
{{- fail (printf "install the chart in its own namespace, not in Linkerd's (%s): the webhook skips the release namespace, so Linkerd's control-plane pods would never be attached" .Release.Namespace) -}}
{{- end -}}
{{- end -}}
