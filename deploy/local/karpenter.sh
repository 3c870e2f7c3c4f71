#!/usr/bin/env bash
# The real Karpenter (its KWOK provider, sigs.k8s.io/karpenter/kwok) on the local Kubernetes control
# plane of kubernetes.sh: the peer ebb is measured against and the provisioner ebb drives. It creates
# NodeClaims and their Nodes itself (annotated kwok.x-k8s.io/node=fake, so KWOK makes them Ready).
#
#   karpenter.sh install   go install sigs.k8s.io/karpenter/kwok into the cache, with its CRDs
#   karpenter.sh start     needs kubernetes.sh's control plane up under the same EBB_INFRA_DIR: applies
#                          the CRDs (server-side, waits until Established) and the KWOKNodeClass
#                          `default`, starts Karpenter, waits for /readyz, writes env
#   karpenter.sh stop      stop it by pid
#   karpenter.sh status
#
# KARPENTER_FEATURE_GATES: Karpenter's FEATURE_GATES (e.g. SpotToSpotConsolidation=true); unset: its
# defaults (SpotToSpotConsolidation=false). KARPENTER_LOG_LEVEL: its LOG_LEVEL (info).
set -euo pipefail
EBB_COMPONENT=karpenter
# shellcheck source=deploy/local/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

KARPENTER_MODULE=sigs.k8s.io/karpenter
KARPENTER_DIR="${EBB_CACHE}/karpenter-${KARPENTER_VERSION}"
KARPENTER_BIN="${KARPENTER_DIR}/bin/kwok"
# the CRDs the binary needs, copied from the module at install (start then needs no Go)
KARPENTER_CRDS="${KARPENTER_DIR}/crds"
PYTHON="${EBB_PYTHON:-${EBB_REPO_ROOT}/.venv/bin/python}"

installed() {
  [[ -x "${KARPENTER_BIN}" && -s "${KARPENTER_CRDS}/karpenter.sh_nodepools.yaml" \
    && -s "${KARPENTER_CRDS}/karpenter.kwok.sh_kwoknodeclasses.yaml" ]]
}

# The CRDs from the module source: the chart's (NodePool, NodeClaim, NodeOverlay, CapacityBuffer) and
# the KWOKNodeClass, which only the provider's API package has.
copy_crds() {
  local go src
  go="$(go_bin)"
  src="$("${go}" mod download -json "${KARPENTER_MODULE}@${KARPENTER_VERSION}" \
    | python3 -c 'import json, sys; d = json.load(sys.stdin); print(d.get("Dir") or sys.exit(d.get("Error")))')"
  mkdir -p "${KARPENTER_CRDS}.tmp"
  cp "${src}"/kwok/charts/crds/*.yaml "${src}/kwok/apis/crds/karpenter.kwok.sh_kwoknodeclasses.yaml" "${KARPENTER_CRDS}.tmp/"
  chmod u+w "${KARPENTER_CRDS}.tmp/"*.yaml # the module cache is read-only
  rm -rf "${KARPENTER_CRDS}"
  mv "${KARPENTER_CRDS}.tmp" "${KARPENTER_CRDS}"
}

install() {
  if installed; then
    log "Karpenter ${KARPENTER_VERSION} (KWOK provider) already in ${KARPENTER_DIR}"
    return 0
  fi
  mkdir -p "${KARPENTER_DIR}/bin"
  # one install at a time (infra.sh install and a test session may race)
  exec {lock}>"${KARPENTER_DIR}/.install.lock"
  flock "${lock}"
  if [[ ! -x "${KARPENTER_BIN}" ]]; then
    local go started=${SECONDS}
    go="$(go_bin)"
    log "building Karpenter ${KARPENTER_VERSION} (KWOK provider; cold: about 3-8 minutes on 2 cores)"
    # `go install pkg@version` builds with the module's own go.mod (it has no replace directives)
    CGO_ENABLED=0 GOBIN="${KARPENTER_DIR}/bin" GOFLAGS=-mod=mod "${go}" install -trimpath -ldflags="-s -w" \
      "${KARPENTER_MODULE}/kwok@${KARPENTER_VERSION}"
    log "built Karpenter in $((SECONDS - started))s"
  fi
  copy_crds
  exec {lock}>&-
  installed || die "install finished but ${KARPENTER_BIN} or the CRDs are missing"
}

# The setting KEY from FILE (KEY=VALUE lines, as write_component_env writes them).
env_value() {
  [[ -f "$1" ]] || return 0
  sed -n "s/^$2=//p" "$1" | head -n1
}

http_ok() {
  python3 - "$1" <<'EOF'
import sys, urllib.request
urllib.request.urlopen(sys.argv[1], timeout=2).read()
EOF
}

start() {
  install
  local kube_env="${EBB_INFRA_DIR}/kubernetes.env" kubeconfig api
  kubeconfig="$(env_value "${kube_env}" KUBECONFIG)"
  api="$(env_value "${kube_env}" KUBE_API_SERVER)"
  if ! is_running kube-apiserver || [[ ! -f "${kubeconfig}" ]]; then
    die "the kubernetes component is not running under ${EBB_INFRA_DIR}; start it first (deploy/local/kubernetes.sh start, or deploy/local/infra.sh up karpenter)"
  fi
  if is_running karpenter; then
    if [[ "$(env_value "${EBB_INFRA_DIR}/karpenter.env" KARPENTER_KUBE_API_SERVER)" == "${api}" ]]; then
      log "already running (pid $(cat "$(pid_file karpenter)"))"
      return 0
    fi
    log "running against an earlier control plane; restarting it"
  fi
  stop_pids TERM karpenter
  [[ -x "${PYTHON}" ]] || die "${PYTHON} missing (the CRDs are applied with the venv's kubernetes-asyncio; run uv sync)"
  local started=${SECONDS}
  # the control plane starts with an empty etcd: the CRDs on every start
  "${PYTHON}" "${EBB_REPO_ROOT}/deploy/local/kube_apply.py" --kubeconfig "${kubeconfig}" --field-manager ebb-local \
    "${KARPENTER_CRDS}"/*.yaml - <<'EOF' || die "could not apply Karpenter's CRDs and KWOKNodeClass to ${api}"
apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata:
  name: default
EOF
  local metrics_port health_port
  metrics_port="$(free_port)"
  health_port="$(free_port)"
  # No --kubeconfig flag: Karpenter reads KUBECONFIG. Both ports bind on all interfaces (it has no
  # bind-address option). Leader election off: it would want a lease namespace and slow the start.
  spawn karpenter env KUBECONFIG="${kubeconfig}" DISABLE_LEADER_ELECTION=true \
    METRICS_PORT="${metrics_port}" HEALTH_PROBE_PORT="${health_port}" LOG_LEVEL="${KARPENTER_LOG_LEVEL:-info}" \
    ${KARPENTER_FEATURE_GATES:+FEATURE_GATES="${KARPENTER_FEATURE_GATES}"} \
    "${KARPENTER_BIN}"
  wait_until karpenter "${KARPENTER_START_TIMEOUT:-60}" http_ok "http://127.0.0.1:${health_port}/readyz"
  log "Karpenter ready in $((SECONDS - started))s on ${api}"
  write_component_env karpenter "KARPENTER_METRICS_URL=http://127.0.0.1:${metrics_port}/metrics" \
    "KARPENTER_HEALTH_URL=http://127.0.0.1:${health_port}/readyz" \
    "KARPENTER_KUBECONFIG=${kubeconfig}" "KARPENTER_KUBE_API_SERVER=${api}" \
    "KARPENTER_FEATURE_GATES=${KARPENTER_FEATURE_GATES:-}" "KARPENTER_PID=$(cat "$(pid_file karpenter)")"
}

stop() {
  stop_pids TERM karpenter
  remove_component_env karpenter
}

status() {
  single_status karpenter KARPENTER_METRICS_URL
}

component_main "$@"
