#!/usr/bin/env bash
# Helm, the client that installs charts/ebb, built from the Go module proxy and cached by version
# (${EBB_CACHE:-~/.cache/ebb}/helm-<version>/bin/helm), as the other deploy/local tools are. It is a client
# only: nothing to start or stop.
#
#   helm.sh install   go install helm.sh/helm/v3/cmd/helm@<version> into the cache (no-op when cached)
#   helm.sh path      install, then print the binary's path (what the tests and the Makefile call)
#   helm.sh manifests [DIR]
#                     render charts/ebb into DIR (default deploy/kubernetes): one file per template, as the
#                     chart lays them out, with charts/ebb/ci/manifests-values.yaml (`make manifests`); without
#                     DIR it first refreshes the chart's copies of deploy/grafana (chart-files)
#   helm.sh chart-files
#                     copy deploy/grafana/* into charts/ebb/files/grafana/ (Helm's .Files reads only inside the
#                     chart: the dashboards and the PrometheusRule it ships are these copies)
#
# The version is HELM_VERSION in lib.sh (EBB_HELM_VERSION overrides it).
set -euo pipefail
EBB_COMPONENT=helm
# shellcheck source=deploy/local/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

HELM_DIR="${EBB_CACHE}/helm-${HELM_VERSION}"
HELM_BIN="${HELM_DIR}/bin/helm"

install() {
  if [[ -x "${HELM_BIN}" ]]; then
    log "Helm ${HELM_VERSION} already in ${HELM_DIR}"
    return 0
  fi
  mkdir -p "${HELM_DIR}/bin"
  # one build at a time (CI's install and a test session may race)
  exec {lock}>"${HELM_DIR}/.install.lock"
  flock "${lock}"
  if [[ ! -x "${HELM_BIN}" ]]; then
    local go started=${SECONDS} major="${HELM_VERSION%%.*}"
    go="$(go_bin)"
    log "building Helm ${HELM_VERSION} (cold: about 3-6 minutes on 2 cores)"
    # the -X flag stamps the version `helm version` reports (a `go install` build otherwise says v3.x-dev)
    CGO_ENABLED=0 GOBIN="${HELM_DIR}/bin.tmp" GOFLAGS=-mod=mod "${go}" install -trimpath \
      -ldflags="-s -w -X helm.sh/helm/${major}/internal/version.version=${HELM_VERSION}" \
      "helm.sh/helm/${major}/cmd/helm@${HELM_VERSION}"
    mv "${HELM_DIR}/bin.tmp/helm" "${HELM_BIN}"
    rmdir "${HELM_DIR}/bin.tmp"
    log "built Helm in $((SECONDS - started))s"
  fi
  exec {lock}>&-
  [[ -x "${HELM_BIN}" ]] || die "install finished but ${HELM_BIN} is missing"
}

# deploy/grafana is the one source of the dashboards and the rules; the chart ships copies of its files (the
# dashboards.enabled ConfigMaps, the prometheusRule.enabled PrometheusRule), refreshed here and nowhere else.
# tests/deploy/test_helm_chart.py fails when a copy differs from its source by a byte.
chart_files() {
  local source="${EBB_REPO_ROOT}/deploy/grafana" target="${EBB_REPO_ROOT}/charts/ebb/files/grafana"
  mkdir -p "${target}"
  find "${target}" -maxdepth 1 -type f -delete
  cp -p "${source}"/* "${target}/"
  log "copied deploy/grafana into charts/ebb/files/grafana"
}

# The plain manifests of deploy/kubernetes are the chart rendered (release `ebb`, namespace `ebb-system`), split
# by the template each object comes from (`# Source: ebb/templates/services/x.yaml` → services/x.yaml, the CRDs
# → crds/), with the two kustomizations. namespace.yaml and secret.template.yaml are not the chart's (Helm is
# given the namespace, and the Secret exists before the install): they are kept as they are.
manifests() {
  local out="${1:-${EBB_REPO_ROOT}/deploy/kubernetes}" chart="${EBB_REPO_ROOT}/charts/ebb"
  install
  local rendered
  rendered="$(mktemp)"
  # shellcheck disable=SC2064 # the file's name now
  trap "rm -f '${rendered}'" RETURN
  mkdir -p "${out}"
  "${HELM_BIN}" template ebb "${chart}" --namespace ebb-system --include-crds \
    --values "${chart}/ci/manifests-values.yaml" >"${rendered}"
  python3 - "${out}" "${rendered}" <<'PY'
import pathlib, re, sys

out = pathlib.Path(sys.argv[1])
rendered = pathlib.Path(sys.argv[2]).read_text()
KEEP = {"namespace.yaml", "secret.template.yaml"}
HEADER = ("# GENERATED from charts/ebb by `deploy/local/helm.sh manifests` (values: charts/ebb/ci/manifests-values.yaml):\n"
          "# edit the chart and run that, not this file.\n")
files: dict[str, list[str]] = {}
for doc in re.split(r"^---\s*$", rendered, flags=re.M):
    match = re.search(r"^# Source: ebb/(?:templates/)?(.+)$", doc, flags=re.M)
    if not match:
        if doc.strip():
            sys.exit(f"a rendered document without its source: {doc[:200]!r}")
        continue
    body = (doc[: match.start()] + doc[match.end() + 1 :]).strip("\n")
    files.setdefault(match.group(1), []).append(body + "\n")
for old in out.rglob("*.yaml"):
    if old.relative_to(out).as_posix() not in KEEP:
        old.unlink()
for name, docs in files.items():
    path = out / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEADER + "---\n".join(docs))
listed = sorted(n for n in files if not n.startswith("monitoring/"))
def kustomization(comment: str, resources: list[str]) -> str:
    return (HEADER + comment + "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n"
            + "".join(f"  - {r}\n" for r in resources))
(out / "kustomization.yaml").write_text(kustomization(
    "# Everything but the Secret (secret.template.yaml: fill it in and apply it first) and the ServiceMonitors\n"
    "# (monitoring/: they need the Prometheus Operator's CRDs). `kubectl apply -k deploy/kubernetes` applies it\n"
    "# (the services restart until the migrations Job has finished).\n", ["namespace.yaml", *listed]))
(out / "monitoring").mkdir(exist_ok=True)
(out / "monitoring" / "kustomization.yaml").write_text(kustomization(
    "# kubectl apply -k deploy/kubernetes/monitoring   (after the Prometheus Operator's CRDs)\n",
    sorted(n.removeprefix("monitoring/") for n in files if n.startswith("monitoring/"))))
PY
  log "rendered charts/ebb into ${out}"
}

case "${1:-}" in
  install) install ;;
  path) install >&2 && echo "${HELM_BIN}" ;;
  manifests) [[ -n "${2:-}" ]] || chart_files; manifests "${2:-}" ;;
  chart-files) chart_files ;;
  *) echo "usage: $0 install|path|manifests [DIR]|chart-files" >&2; exit 2 ;;
esac
