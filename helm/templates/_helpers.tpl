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

{{/*
"true" when the webhook configuration gets the matchCondition that leaves every openshift-* namespace
alone, else "false". auto: where the server is Kubernetes 1.30 or later (matchConditions GA; beta and on
by default in 1.28 and 1.29, off by default in 1.27, absent before), judged by .Capabilities.KubeVersion (the server's on
install and upgrade, --kube-version with helm template). "-0" lets pre-release and vendor versions such
as v1.30.2-gke.1 compare as 1.30.
*/}}
{{- define "linkerd-multus.openshiftNamespacesByName" -}}
{{- $v := .Values.webhook.openshiftNamespacesByName -}}
{{- if eq (toString $v) "auto" -}}
{{- semverCompare ">=1.30.0-0" .Capabilities.KubeVersion.Version | toString -}}
{{- else -}}
{{- toString $v -}}
{{- end -}}
{{- end -}}

{{/*
"true" when the chart renders the per-node NodeMultus write policy (templates/node-multus-policy.yaml),
else "false". auto: where helm sees the server serve admissionregistration.k8s.io/v1
ValidatingAdmissionPolicy (.Capabilities.APIVersions: the server's discovery on install and upgrade,
--api-versions with helm template, which Argo CD passes from the cluster) or a Kubernetes 1.30+ server
(.Capabilities.KubeVersion: --kube-version with helm template), where that API is GA and pod-bound
tokens name their node. Without either, helm template renders for v1.25 and leaves it out: GitOps tools
that give neither set true (or false) themselves.
*/}}
{{- define "linkerd-multus.nodeMultusPolicy" -}}
{{- $v := .Values.cni.nodeMultusPolicy -}}
{{- if eq (toString $v) "auto" -}}
{{- or (.Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy") (semverCompare ">=1.30.0-0" .Capabilities.KubeVersion.Version) | toString -}}
{{- else -}}
{{- toString $v -}}
{{- end -}}
{{- end -}}

{{/*
The MutatingWebhookConfiguration's name. The apiserver calls mutating webhook configurations in name order,
and this webhook must see the pod after Linkerd's proxy injector has added its containers (their uids, proxy
2102 and validator 65534, are what it moves into OpenShift's range; when it runs first, the apiserver reruns
the built-in admission plugins before reinvoking it, and OpenShift's SCC admission rejects the pod). "zz-"
sorts after every injector name Linkerd's charts have used (linkerd-proxy-injector-webhook-config) and after
most webhooks, so this webhook sees the injected pod on its first call; reinvocationPolicy IfNeeded stays for
webhooks that change the pod later. Not truncated to 63: this kind's names may be 253 characters long, and a
cut could give two releases one name. Earlier versions named it after the fullname; upgrades carry its
caBundle over ("linkerd-multus.caBundleCarried").
*/}}
{{/* The MutatingAdmissionPolicy and its binding the operator keeps (admission auto or policy):
vocab::ADMISSION_POLICY_NAME, the operator's default; one per cluster. */}}
{{- define "linkerd-multus.admissionPolicyName" -}}
attach.multus.linkerd.io
{{- end -}}

{{- define "linkerd-multus.webhookConfigName" -}}
{{- printf "zz-%s" (include "linkerd-multus.fullname" .) -}}
{{- end -}}

{{/*
selfManaged and certManager modes: the caBundle to render, so that a renamed webhook configuration can be
called from the moment helm creates it. In those modes the caBundle is filled in on the cluster (by the
operator, or by cert-manager's CA injector), seconds after the object exists; helm upgrade creates the
configuration of the new name before it deletes the one of the old name, and with failurePolicy Fail every pod
creation the webhook matches would fail until then. So this looks the caBundle up, in the first of these
that has one for a webhook calling this release's Service:
- the live configuration of the current name: once a manifest carried a caBundle, the next one must carry it
  too, or helm's three-way merge would remove it from the live object (and it follows the live value when
  the operator or cert-manager renews the CA);
- the configuration of the previous name (the fullname), which this upgrade deletes.
Empty on a first install, and with `helm template` (no cluster: lookup returns nothing).
*/}}
{{- define "linkerd-multus.caBundleCarried" -}}
{{- $svc := include "linkerd-multus.webhookServiceName" . -}}
{{- $ns := .Release.Namespace -}}
{{- $found := "" -}}
{{- range $name := list (include "linkerd-multus.webhookConfigName" .) (include "linkerd-multus.fullname" .) -}}
{{- if not $found -}}
{{- $live := lookup "admissionregistration.k8s.io/v1" "MutatingWebhookConfiguration" "" $name -}}
{{- range $hook := (dig "webhooks" (list) $live) -}}
{{- $service := dig "clientConfig" "service" (dict) $hook -}}
{{- if and (not $found) (eq (dig "name" "" $service) $svc) (eq (dig "namespace" "" $service) $ns) -}}
{{- $found = dig "clientConfig" "caBundle" "" $hook -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $found -}}
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

{{/* The plugin's kubeconfig on the nodes (the operator's --cni-kubeconfig): operator.cniKubeconfig, or,
empty, where this chart's installer writes it (cni.enabled, or nodeAgent.enabled with the NodeAgent's
spec taken from the cni values) or else where Linkerd's linkerd2-cni does. */}}
{{- define "linkerd-multus.cniKubeconfig" -}}
{{- if .Values.operator.cniKubeconfig -}}
{{- .Values.operator.cniKubeconfig -}}
{{- else if or .Values.cni.enabled (.Values.nodeAgent | default dict).enabled -}}
{{- printf "%s/%s" (trimSuffix "/" .Values.cni.destCNINetDir) .Values.cni.kubeconfigName -}}
{{- else -}}
/etc/cni/net.d/ZZZ-linkerd-cni-kubeconfig
{{- end -}}
{{- end -}}

{{/* Values that must agree with each other; a mismatch would install something that cannot work. */}}
{{- define "linkerd-multus.validate" -}}
{{- if and .Values.cni.enabled .Values.operator.cniKubeconfig (ne .Values.operator.cniKubeconfig (printf "%s/%s" (trimSuffix "/" .Values.cni.destCNINetDir) .Values.cni.kubeconfigName)) -}}
{{- fail (printf "operator.cniKubeconfig (%s) must be cni.destCNINetDir/cni.kubeconfigName (%s/%s) when cni.enabled: the NADs would point at a kubeconfig the installer never writes" .Values.operator.cniKubeconfig .Values.cni.destCNINetDir .Values.cni.kubeconfigName) -}}
{{- end -}}
{{- if and (eq .Values.attach "auxChain") (not (or .Values.cni.enabled (.Values.nodeAgent | default dict).enabled)) -}}
{{- fail "attach=auxChain needs cni.enabled=true (or nodeAgent.enabled=true): only this chart's installer (--attach aux-chain) puts linkerd-cni into Multus' auxiliary chain, Linkerd's own linkerd2-cni does not" -}}
{{- end -}}
{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElect) -}}
{{- fail "replicas > 1 needs leaderElect=true: several replicas would write the same NADs" -}}
{{- end -}}
{{- if eq .Values.operator.linkerdNamespace .Release.Namespace -}}
{{- fail (printf "install the chart in its own namespace, not in Linkerd's (%s): the webhook skips the release namespace, so Linkerd's control-plane pods would never be attached" .Release.Namespace) -}}
{{- end -}}
{{- end -}}

{{/* `attach` as the operator's --attach value (the chart spells it like its other values). */}}
{{- define "linkerd-multus.attachFlag" -}}
{{- if eq .Values.attach "auxChain" -}}aux-chain{{- else -}}nad{{- end -}}
{{- end -}}

{{/* The directory holding Multus' auxiliary chain's subdirectory, as the node sees it (cni.auxChain.dir,
empty: cni.destCNINetDir), without a trailing slash. */}}
{{- define "linkerd-multus.auxChainDir" -}}
{{- trimSuffix "/" (.Values.cni.auxChain.dir | default .Values.cni.destCNINetDir) -}}
{{- end -}}

{{/*
"true" when the chart renders its monitoring objects (templates/monitoring.yaml), else "false". auto: where
helm sees the server serve monitoring.coreos.com/v1 ServiceMonitor (.Capabilities.APIVersions: discovery on
install and upgrade, --api-versions with helm template); without the CRDs the objects could not be applied.
A release installed before this value existed has none (`helm upgrade --reuse-values` reuses its values
without the chart's new defaults): that is "false", not a render error.
*/}}
{{- define "linkerd-multus.monitoring" -}}
{{- $v := (.Values.monitoring | default dict).enabled | default false -}}
{{- if eq (toString $v) "auto" -}}
{{- .Capabilities.APIVersions.Has "monitoring.coreos.com/v1/ServiceMonitor" | toString -}}
{{- else -}}
{{- toString $v -}}
{{- end -}}
{{- end -}}
