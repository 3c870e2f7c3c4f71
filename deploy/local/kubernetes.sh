#!/usr/bin/env bash
# A local Kubernetes control plane for ebb's tests: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler and the KWOK controller (fake nodes and pods).
#
#   kubernetes.sh install   build etcd + Kubernetes (one `go build`) and kwok into the cache
#   kubernetes.sh start     certs, kubeconfig, start all five, wait until ready, write env
#   kubernetes.sh stop      stop them by pid
#   kubernetes.sh status
#
# EBB_KWOK_NODE_READY_SECONDS=MIN-MAX (e.g. 30-90): a cloud's start-up time. A Node KWOK manages is
# NotReady at once (as a kubelet registers it) and Ready a uniformly random MIN to MAX seconds later (its
# node-initialize Stage with a delay); a taint node.cloudprovider.kubernetes.io/uninitialized on it is removed
# once it is Ready (node-uninitialized), so a Node registered with it takes no pod before. Unset (the
# default, what the tests use): Ready at once.
set -euo pipefail
EBB_COMPONENT=kubernetes
# shellcheck source=deploy/local/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

K8S_DIR="${EBB_CACHE}/kubernetes-${KUBERNETES_VERSION}"
ETCD_DIR="${EBB_CACHE}/etcd-${ETCD_VERSION}"
KWOK_DIR="${EBB_CACHE}/kwok-${KWOK_VERSION}"
STATE="${EBB_INFRA_DIR}/kubernetes"
PKI="${STATE}/pki"
KUBECONFIG_PATH="${STATE}/admin.kubeconfig"
COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)

installed() {
  [[ -x "${K8S_DIR}/bin/kube-apiserver" && -x "${K8S_DIR}/bin/kube-controller-manager" \
    && -x "${K8S_DIR}/bin/kube-scheduler" && -x "${ETCD_DIR}/bin/etcd" && -x "${KWOK_DIR}/bin/kwok" ]]
}

build_kubernetes() {
  local go src gomod minor staging_version started
  go="$(go_bin)"
  src="${K8S_DIR}/src"
  rm -rf "${src}"
  mkdir -p "${src}" "${K8S_DIR}/bin" "${ETCD_DIR}/bin"
  started=${SECONDS}
  log "building etcd ${ETCD_VERSION} + kube-apiserver, kube-controller-manager, kube-scheduler ${KUBERNETES_VERSION} (cold: about 6-9 minutes on 2 cores)"

  # Kubernetes' own go.mod replaces every staging module (k8s.io/api, ...) with ./staging/...;
  # a module that requires k8s.io/kubernetes must replace each with its published v0.X.Y.
  gomod="$(cd "${src}" && "${go}" mod download -json "k8s.io/kubernetes@${KUBERNETES_VERSION}" \
    | python3 -c 'import json, sys; d = json.load(sys.stdin); print(d.get("GoMod") or sys.exit(d.get("Error")))')"
  minor="${KUBERNETES_VERSION#v1.}"
  staging_version="v0.${minor}"
  (
    cd "${src}"
    "${go}" mod init ebb.local/kubernetes-build >/dev/null 2>&1
    local args=()
    while read -r mod; do
      args+=("-replace=${mod}=${mod}@${staging_version}")
    done < <(sed -nE 's#^[[:space:]]*(k8s\.io/[A-Za-z0-9._-]+)[[:space:]]+=>[[:space:]]+\./staging/.*#\1#p' "${gomod}" | sort -u)
    ((${#args[@]} > 10)) || die "found only ${#args[@]} staging replaces in ${gomod}"
    log "replacing ${#args[@]} staging modules with ${staging_version}"
    "${go}" mod edit "${args[@]}" \
      "-require=k8s.io/kubernetes@${KUBERNETES_VERSION}" \
      "-require=go.etcd.io/etcd/server/v3@${ETCD_VERSION}"
    cat >tools.go <<'EOF'
//go:build tools

package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
EOF
    "${go}" mod tidy -e >/dev/null 2>"${K8S_DIR}/tidy.log" || { cat "${K8S_DIR}/tidy.log" >&2; die "go mod tidy failed"; }
    local got
    got="$("${go}" list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)"
    [[ "${got}" == "${ETCD_VERSION}" ]] || log "note: etcd resolved to ${got} (Kubernetes ${KUBERNETES_VERSION} requires at least that)"
    log "modules resolved after $((SECONDS - started))s; compiling"

    local pkg=k8s.io/component-base/version cpkg=k8s.io/client-go/pkg/version date
    date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    local vflags=""
    for p in "${pkg}" "${cpkg}"; do
      vflags+=" -X ${p}.gitVersion=${KUBERNETES_VERSION} -X ${p}.gitMajor=1 -X ${p}.gitMinor=${minor%%.*}"
      vflags+=" -X ${p}.gitTreeState=clean -X ${p}.buildDate=${date}"
    done
    # One invocation: shared packages (grpc, protobuf, apimachinery, ...) compile once.
    CGO_ENABLED=0 GOFLAGS=-mod=mod "${go}" build -trimpath -ldflags="-s -w${vflags}" -o "${K8S_DIR}/bin/" \
      k8s.io/kubernetes/cmd/kube-apiserver \
      k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kube-scheduler \
      go.etcd.io/etcd/server/v3
  )
  # `go build` names go.etcd.io/etcd/server/v3's binary "server".
  mv -f "${K8S_DIR}/bin/server" "${ETCD_DIR}/bin/etcd"
  log "built Kubernetes + etcd in $((SECONDS - started))s"
}

build_kwok() {
  local go started=${SECONDS}
  go="$(go_bin)"
  mkdir -p "${KWOK_DIR}/bin"
  log "building kwok ${KWOK_VERSION}"
  CGO_ENABLED=0 GOBIN="${KWOK_DIR}/bin" GOFLAGS=-mod=mod "${go}" install -trimpath -ldflags="-s -w" \
    "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}"
  log "built kwok in $((SECONDS - started))s"
}

install() {
  need_cmd openssl
  if installed; then
    log "etcd ${ETCD_VERSION}, Kubernetes ${KUBERNETES_VERSION}, kwok ${KWOK_VERSION} already in ${EBB_CACHE}"
    return 0
  fi
  [[ -x "${K8S_DIR}/bin/kube-apiserver" && -x "${ETCD_DIR}/bin/etcd" ]] || build_kubernetes
  [[ -x "${KWOK_DIR}/bin/kwok" ]] || build_kwok
  installed || die "build finished but binaries are missing"
}

# ---------------------------------------------------------------- certificates, kubeconfig
make_pki() {
  need_cmd openssl
  mkdir -p "${PKI}"
  (
    cd "${PKI}"
    umask 077
    openssl genrsa -out ca.key 2048 2>/dev/null
    openssl req -x509 -new -nodes -key ca.key -subj "/CN=ebb-local-ca" -days 3650 -out ca.crt 2>/dev/null
    sign() { # sign NAME SUBJECT EXTENSIONS
      openssl genrsa -out "$1.key" 2048 2>/dev/null
      openssl req -new -key "$1.key" -subj "$2" -out "$1.csr" 2>/dev/null
      printf '%s\n' "$3" >"$1.ext"
      openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -set_serial "0x$(openssl rand -hex 8)" \
        -days 3650 -extfile "$1.ext" -out "$1.crt" 2>/dev/null
      rm -f "$1.csr" "$1.ext"
    }
    sign apiserver "/CN=kube-apiserver" "$(printf '%s\n' \
      'basicConstraints=CA:FALSE' 'keyUsage=critical,digitalSignature,keyEncipherment' \
      'extendedKeyUsage=serverAuth' \
      'subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local')"
    sign admin "/O=system:masters/CN=ebb-admin" "$(printf '%s\n' \
      'basicConstraints=CA:FALSE' 'keyUsage=critical,digitalSignature,keyEncipherment' 'extendedKeyUsage=clientAuth')"
    # the aggregation layer's client (and the CA that the components' authentication trusts
    # for request headers)
    sign front-proxy-client "/CN=front-proxy-client" "$(printf '%s\n' \
      'basicConstraints=CA:FALSE' 'keyUsage=critical,digitalSignature,keyEncipherment' 'extendedKeyUsage=clientAuth')"
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  ) || die "certificate generation failed"
}

write_kubeconfig() {
  local server="$1"
  local ca crt key
  ca="$(base64 -w0 <"${PKI}/ca.crt")"
  crt="$(base64 -w0 <"${PKI}/admin.crt")"
  key="$(base64 -w0 <"${PKI}/admin.key")"
  (
    umask 077
    cat >"${KUBECONFIG_PATH}" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: ebb-local
  cluster:
    server: ${server}
    certificate-authority-data: ${ca}
users:
- name: ebb-admin
  user:
    client-certificate-data: ${crt}
    client-key-data: ${key}
contexts:
- name: ebb-local
  context:
    cluster: ebb-local
    user: ebb-admin
    namespace: default
current-context: ebb-local
EOF
  )
}

# ---------------------------------------------------------------- readiness checks
# http_ok URL [expected-substring]: GET URL (https with the admin client cert, CA-verified
# for the apiserver, unverified for the components' self-signed serving certs).
http_ok() {
  python3 - "$1" "${2:-}" "${PKI}" <<'EOF'
import ssl, sys, urllib.request
url, expect, pki = sys.argv[1], sys.argv[2], sys.argv[3]
ctx = None
if url.startswith("https://"):
    ctx = ssl.create_default_context(cafile=f"{pki}/ca.crt")
    ctx.load_cert_chain(f"{pki}/admin.crt", f"{pki}/admin.key")
    if url.endswith("#insecure"):
        url = url.removesuffix("#insecure")
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
body = urllib.request.urlopen(url, timeout=3, context=ctx).read().decode()
if expect and expect not in body:
    sys.exit(f"unexpected answer: {body[:200]}")
EOF
}

# The API server's audit log, ${STATE}/audit.log (JSON lines; KUBE_AUDIT_LOG in env): every create,
# update, patch and delete of a Node (not its status) or a karpenter.sh NodeClaim at level Request (who,
# with which User-Agent, and the body sent), and every eviction at level Metadata (who, which pod, the
# answer: 201, or 429 when a PodDisruptionBudget refused it) and every delete of a Pod at level Metadata
# (the chaos run checks that ebb never deletes a pod past its PodDisruptionBudget), and every other write at level
# Metadata (who wrote what: shadow mode is checked to write nothing but its Lease, tests/integration/test_shadow_mode.py)
# but the status of Nodes and Pods, which every node's heartbeat writes. ebb's services name themselves in their
# User-Agent, so the tests next to the real Karpenter check from it what ebb wrote and evicted
# (tests/integration/test_karpenter_system.py). Nothing else is logged: no reads, no bodies but those above.
write_audit_policy() {
  cat >"${STATE}/audit-policy.yaml" <<'EOF'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Request
    verbs: [create, update, patch, delete, deletecollection]
    resources:
      - {group: "", resources: [nodes]}
      - {group: karpenter.sh, resources: [nodeclaims]}
  - level: Metadata
    verbs: [create]
    resources:
      - {group: "", resources: [pods/eviction]}
  - level: Metadata
    verbs: [delete]
    resources:
      - {group: "", resources: [pods]}
  - level: None
    resources:
      - {group: "", resources: [nodes/status, pods/status]}
  - level: Metadata
    verbs: [create, update, patch, delete, deletecollection]
  - level: None
EOF
}

# kwok_node_stage NAME KEY OPERATOR VALUES [KEY OPERATOR VALUES ...] <REST: a KWOK Stage of Nodes named NAME,
# selected by each KEY (a KWOK jq expression) OPERATOR (In, NotIn) VALUES (comma-separated), then the rest of its
# spec (delay, next, ...) as stdin has it, indented under spec.
kwok_node_stage() {
  local name="$1" value values
  shift
  printf -- '---\napiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata:\n  name: %s\nspec:\n' "${name}"
  printf -- '  resourceRef:\n    apiGroup: v1\n    kind: Node\n  selector:\n    matchExpressions:\n'
  while (($# >= 3)); do
    printf -- "    - key: '%s'\n      operator: '%s'\n      values:\n" "$1" "$2"
    IFS=, read -ra values <<<"$3"
    for value in "${values[@]}"; do
      printf -- "      - '%s'\n" "${value}"
    done
    shift 3
  done
  (($# == 0)) || die "kwok_node_stage ${name}: a selector wants KEY OPERATOR VALUES"
  cat
}

# kwok_node_stages MIN-MAX: KWOK's two default node Stages (kustomize/stage/node/fast's node-initialize
# and node/heartbeat's node-heartbeat, as KWOK v0.7.0 ships them; with a lease duration set KWOK uses the
# heartbeat without lease) with node-initialize delayed, and before it a node-not-ready Stage with no delay
# that draws when the Node will be Ready: MIN to MAX seconds from then, uniformly (sprig's randInt, in ms),
# kept in the Node's annotation kwok.ebb.local/ready-at, which node-initialize's delay counts down to. KWOK
# computes a delay again at every change of the Node (a jittered delay would be drawn again each time: the
# node lifecycle controller's rate-limited NoExecute taint and Karpenter's updates made a 30-90 s start-up
# take up to three minutes); a moment in time stays put. The conditions' lastTransitionTime is when the
# Node turned Ready (KWOK's own templates give its creation), which the heartbeat keeps (bench/peer.py checks
# from it that no pod was bound before). Stages in the config replace KWOK's default node stages, so all are
# given; the pod stages stay KWOK's defaults.
#
# Why: kube-scheduler does not look at a Node's Ready condition, only at its taints. A kubelet registers
# its Node NotReady, tainted node.kubernetes.io/not-ready:NoSchedule (and, under an external cloud provider,
# node.cloudprovider.kubernetes.io/uninitialized, which the cloud's controller removes). Karpenter's KWOK
# provider creates the Node itself, with no condition and only the taint karpenter.sh/unregistered, which
# Karpenter's registration removes within a second or two; pods were then bound to a new Node seconds after
# its launch, long before its delayed Ready. node-not-ready sets Ready=False (and appends the not-ready taint
# with a JSON patch when the Node still has karpenter.sh/unregistered, so a concurrent change is not lost);
# the controller-manager's node lifecycle controller keeps the not-ready taint while Ready is False and
# removes it at Ready=True. That alone leaks on a loaded machine: KWOK marks the Node NotReady seconds after
# Karpenter registered it, and the lifecycle controller takes the not-ready taint off a Node with no Ready
# condition. So bench/peer.py's NodePool has the uninitialized taint as a startup taint, which Karpenter's
# registration adds in the very patch that removes karpenter.sh/unregistered, and only node-uninitialized
# removes it, once the Node is Ready: a JSON patch that tests the taint's index first, so a Stage played on
# an older copy of the Node fails (and is played again at its next change) instead of removing another
# taint. Karpenter counts both taints as ephemeral: its simulation still counts on the booting Node (it does
# not launch more for the pods waiting on it), and its NodeClaim is Initialized once they are gone.
kwok_node_stages() {
  local spec="$1" low high
  [[ "${spec}" =~ ^([0-9]+)(-([0-9]+))?$ ]] || die "EBB_KWOK_NODE_READY_SECONDS=${spec}: want MIN-MAX seconds (e.g. 30-90) or one number"
  low="${BASH_REMATCH[1]}"
  high="${BASH_REMATCH[3]:-${low}}"
  ((high >= low)) || die "EBB_KWOK_NODE_READY_SECONDS=${spec}: MAX below MIN"
  local ready='.status.conditions.[] | select( .type == "Ready" ) | .status'
  # @LOW_MS@ and @HIGH_MS@ filled in at the end (the templates' own $ must stay as they are: no shell expansion)
  {
    kwok_node_stage node-not-ready "${ready}" NotIn True,False <<'EOF'
  next:
    patches:
    - root: metadata
      template: |
        annotations:
          kwok.ebb.local/ready-at: {{ now | dateModify (printf "+%dms" (randInt @LOW_MS@ @HIGH_MS@)) | date "2006-01-02T15:04:05.000Z07:00" | Quote }}
    - subresource: status
      root: status
      template: |
        {{ $now := Now }}
        conditions:
        - lastHeartbeatTime: {{ $now | Quote }}
          lastTransitionTime: {{ $now | Quote }}
          message: "the node is starting"
          reason: KubeletNotReady
          status: "False"
          type: Ready
    - type: json
      root: spec
      template: |
        {{ $tainted := false }}
        {{ range .spec.taints }}{{ if eq .key "node.kubernetes.io/not-ready" }}{{ $tainted = true }}{{ end }}{{ end }}
        {{ if and .spec.taints (not $tainted) }}
        - op: add
          path: /taints/-
          value:
            key: node.kubernetes.io/not-ready
            effect: NoSchedule
        {{ else }}
        []
        {{ end }}
EOF
    kwok_node_stage node-uninitialized "${ready}" In True \
      '.spec.taints.[] | select( .key == "node.cloudprovider.kubernetes.io/uninitialized" ) | .effect' In NoSchedule <<'EOF'
  next:
    patches:
    - type: json
      root: spec
      template: |
        {{ range $i, $t := .spec.taints }}{{ if eq $t.key "node.cloudprovider.kubernetes.io/uninitialized" }}
        - op: test
          path: /taints/{{ $i }}/key
          value: node.cloudprovider.kubernetes.io/uninitialized
        - op: remove
          path: /taints/{{ $i }}
        {{ end }}{{ end }}
EOF
    kwok_node_stage node-initialize "${ready}" In False <<'EOF'
  delay:
    durationMilliseconds: @LOW_MS@
    durationFrom:
      expressionFrom: '.metadata.annotations["kwok.ebb.local/ready-at"]'
  next:
    statusTemplate: |
      {{ $now := Now }}
      {{ $lastTransitionTime := $now }}
      conditions:
      {{ range NodeConditions }}
      - lastHeartbeatTime: {{ $now | Quote }}
        lastTransitionTime: {{ $lastTransitionTime | Quote }}
        message: {{ .message | Quote }}
        reason: {{ .reason | Quote }}
        status: {{ .status | Quote }}
        type: {{ .type  | Quote}}
      {{ end }}

      addresses:
      {{ with .status.addresses }}
      {{ YAML . 1 }}
      {{ else }}
      {{ with NodeIP }}
      - address: {{ . | Quote }}
        type: InternalIP
      {{ end }}
      {{ with NodeName }}
      - address: {{ . | Quote }}
        type: Hostname
      {{ end }}
      {{ end }}

      {{ with NodePort }}
      daemonEndpoints:
        kubeletEndpoint:
          Port: {{ . }}
      {{ end }}

      allocatable:
      {{ with .status.allocatable }}
      {{ YAML . 1 }}
      {{ else }}
        cpu: 1k
        memory: 1Ti
        pods: 1M
      {{ end }}
      capacity:
      {{ with .status.capacity }}
      {{ YAML . 1 }}
      {{ else }}
        cpu: 1k
        memory: 1Ti
        pods: 1M
      {{ end }}

      {{ $nodeInfo := .status.nodeInfo }}
      {{ $kwokVersion := printf "kwok-%s" Version }}
      nodeInfo:
        architecture: {{ or $nodeInfo.architecture "amd64" }}
        bootID: {{ or $nodeInfo.bootID `""` }}
        containerRuntimeVersion: {{ or $nodeInfo.containerRuntimeVersion $kwokVersion }}
        kernelVersion: {{ or $nodeInfo.kernelVersion $kwokVersion }}
        kubeProxyVersion: {{ or $nodeInfo.kubeProxyVersion $kwokVersion }}
        kubeletVersion: {{ or $nodeInfo.kubeletVersion $kwokVersion }}
        machineID: {{ or $nodeInfo.machineID `""` }}
        operatingSystem: {{ or $nodeInfo.operatingSystem "linux" }}
        osImage: {{ or $nodeInfo.osImage `""` }}
        systemUUID: {{ or $nodeInfo.systemUUID `""` }}
      phase: Running
EOF
    kwok_node_stage node-heartbeat '.status.phase' In Running "${ready}" In True <<'EOF'
  delay:
    durationMilliseconds: 20000
    jitterDurationMilliseconds: 25000
  next:
    statusTemplate: |
      {{ $now := Now }}
      {{ $lastTransitionTime := or .metadata.creationTimestamp $now }}
      {{ range .status.conditions }}{{ if eq .type "Ready" }}{{ $lastTransitionTime = .lastTransitionTime }}{{ end }}{{ end }}
      conditions:
      {{ range NodeConditions }}
      - lastHeartbeatTime: {{ $now | Quote }}
        lastTransitionTime: {{ $lastTransitionTime | Quote }}
        message: {{ .message | Quote }}
        reason: {{ .reason | Quote }}
        status: {{ .status | Quote }}
        type: {{ .type | Quote }}
      {{ end }}
  immediateNextStage: true
EOF
  } | sed -e "s/@LOW_MS@/$((low * 1000))/" -e "s/@HIGH_MS@/$((high * 1000 + 1))/"
}

# ---------------------------------------------------------------- start / stop
start() {
  install
  if is_running kube-apiserver; then
    log "already running (kube-apiserver pid $(cat "$(pid_file kube-apiserver)"))"
    return 0
  fi
  stop_processes # a partial earlier start
  local etcd_port peer_port api_port cm_port sched_port kwok_port
  etcd_port="$(free_port)"; peer_port="$(free_port)"; api_port="$(free_port)"
  cm_port="$(free_port)"; sched_port="$(free_port)"; kwok_port="$(free_port)"
  rm -rf "${STATE}"
  mkdir -p "${STATE}/etcd"
  make_pki
  write_audit_policy
  local api="https://127.0.0.1:${api_port}"
  write_kubeconfig "${api}"
  local started=${SECONDS}

  spawn etcd "${ETCD_DIR}/bin/etcd" --name ebb --data-dir "${STATE}/etcd" \
    --listen-client-urls "http://127.0.0.1:${etcd_port}" --advertise-client-urls "http://127.0.0.1:${etcd_port}" \
    --listen-peer-urls "http://127.0.0.1:${peer_port}" --initial-advertise-peer-urls "http://127.0.0.1:${peer_port}" \
    --initial-cluster "ebb=http://127.0.0.1:${peer_port}" --initial-cluster-state new \
    --unsafe-no-fsync --quota-backend-bytes=2147483648 --log-level=warn
  wait_until etcd 60 http_ok "http://127.0.0.1:${etcd_port}/health" '"health":"true"'

  spawn kube-apiserver "${K8S_DIR}/bin/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:${etcd_port}" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="${api_port}" \
    --tls-cert-file="${PKI}/apiserver.crt" --tls-private-key-file="${PKI}/apiserver.key" \
    --client-ca-file="${PKI}/ca.crt" \
    --requestheader-client-ca-file="${PKI}/ca.crt" --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --proxy-client-cert-file="${PKI}/front-proxy-client.crt" --proxy-client-key-file="${PKI}/front-proxy-client.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="${PKI}/sa.pub" --service-account-signing-key-file="${PKI}/sa.key" \
    --service-cluster-ip-range=10.0.0.0/24 \
    --authorization-mode=Node,RBAC --allow-privileged=true \
    --endpoint-reconciler-type=none --profiling=false \
    --audit-policy-file="${STATE}/audit-policy.yaml" --audit-log-path="${STATE}/audit.log" \
    --audit-log-format=json --audit-log-mode=blocking --audit-log-maxsize=100 --audit-log-maxbackup=1 \
    --cert-dir="${STATE}/apiserver-certs"
  wait_until kube-apiserver "${KUBE_START_TIMEOUT:-120}" http_ok "${api}/readyz" ok

  # --node-monitor-grace-period and --node-startup-grace-period: longer than this machine's slowest
  # apiserver restart (about 70 s under load). A longer outage than the defaults (50 s, 60 s) makes the
  # node-lifecycle controller find every lease stale, mark the nodes unreachable and their pods NotReady;
  # a real kubelet marks its pods Ready again, KWOK does not, so PodDisruptionBudgets would refuse
  # evictions for good (seen in the chaos run).
  spawn kube-controller-manager "${K8S_DIR}/bin/kube-controller-manager" \
    --kubeconfig="${KUBECONFIG_PATH}" \
    --authentication-kubeconfig="${KUBECONFIG_PATH}" --authorization-kubeconfig="${KUBECONFIG_PATH}" \
    --bind-address=127.0.0.1 --secure-port="${cm_port}" --cert-dir="${STATE}/controller-manager-certs" \
    --controllers='*' --use-service-account-credentials=false \
    --root-ca-file="${PKI}/ca.crt" --service-account-private-key-file="${PKI}/sa.key" \
    --cluster-signing-cert-file="${PKI}/ca.crt" --cluster-signing-key-file="${PKI}/ca.key" \
    --leader-elect=false --allocate-node-cidrs=false --profiling=false \
    --node-monitor-grace-period=180s --node-startup-grace-period=180s

  # --v=2: the log says when a pod was found no room and when it was bound (a failed wait's diagnosis in
  # tests/kit/karpenter_cluster.py quotes those lines).
  # --pod-max-in-unschedulable-pods-duration=30s (default 5m): a pod whose requeue event the scheduler's
  # queueing hints passed over is tried again within 30 s, not 5 minutes (tests wait about 60 s for a pod to
  # run). A CI run failed on a pod not Running 60 s after its Karpenter node was Ready, cause not recorded;
  # this bounds that case if it was a passed-over requeue, and the logs and the diagnosis say if it was not.
  spawn kube-scheduler "${K8S_DIR}/bin/kube-scheduler" \
    --kubeconfig="${KUBECONFIG_PATH}" \
    --authentication-kubeconfig="${KUBECONFIG_PATH}" --authorization-kubeconfig="${KUBECONFIG_PATH}" \
    --bind-address=127.0.0.1 --secure-port="${sched_port}" --cert-dir="${STATE}/scheduler-certs" \
    --leader-elect=false --profiling=false --v=2 --pod-max-in-unschedulable-pods-duration=30s

  # KWOK: fakes the kubelet for nodes annotated kwok.x-k8s.io/node=fake, with its default
  # "fast" node and pod stages (node ready + lease heartbeat; pod running, complete, delete), or with
  # EBB_KWOK_NODE_READY_SECONDS its node stages delayed (kwok_node_stages).
  cat >"${STATE}/kwok.yaml" <<'EOF'
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options: {}
EOF
  local node_ready="${EBB_KWOK_NODE_READY_SECONDS:-}"
  if [[ -n "${node_ready}" ]]; then
    kwok_node_stages "${node_ready}" >>"${STATE}/kwok.yaml"
    log "KWOK nodes become Ready ${node_ready} s after they appear (EBB_KWOK_NODE_READY_SECONDS)"
  fi
  spawn kwok "${KWOK_DIR}/bin/kwok" --config="${STATE}/kwok.yaml" \
    --kubeconfig="${KUBECONFIG_PATH}" \
    --manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --node-lease-duration-seconds=40 \
    --server-address="127.0.0.1:${kwok_port}" --cidr=10.244.0.0/16 --node-ip=127.0.0.1

  wait_until kube-controller-manager 60 http_ok "https://127.0.0.1:${cm_port}/healthz#insecure" ok
  wait_until kube-scheduler 60 http_ok "https://127.0.0.1:${sched_port}/healthz#insecure" ok
  wait_until kwok 60 http_ok "http://127.0.0.1:${kwok_port}/healthz"
  # pods need the `default` ServiceAccount, which the controller-manager creates
  wait_until kube-controller-manager 60 http_ok "${api}/api/v1/namespaces/default/serviceaccounts/default"
  log "control plane ready in $((SECONDS - started))s: ${api}"
  write_component_env kubernetes "KUBECONFIG=${KUBECONFIG_PATH}" "EBB_KUBECONFIG=${KUBECONFIG_PATH}" \
    "KUBE_API_SERVER=${api}" "ETCD_ENDPOINT=http://127.0.0.1:${etcd_port}" "KUBE_AUDIT_LOG=${STATE}/audit.log" \
    "KWOK_NODE_READY_SECONDS=${node_ready:-0}"
}

stop_processes() {
  stop_pids TERM kwok kube-scheduler kube-controller-manager
  stop_pids TERM kube-apiserver
  stop_pids TERM etcd
}

stop() {
  stop_processes
  remove_component_env kubernetes
}

status() {
  local c rc=0
  for c in "${COMPONENTS[@]}"; do
    if is_running "${c}"; then
      echo "${c}: running (pid $(cat "$(pid_file "${c}")"))"
    else
      echo "${c}: stopped"
      rc=1
    fi
  done
  return "${rc}"
}

component_main "$@"
