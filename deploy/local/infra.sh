#!/usr/bin/env bash
# ebb's real local infrastructure, without Docker: Kafka (KRaft), PostgreSQL, a Kubernetes
# control plane with KWOK, moto (SQS/EC2), and the real Karpenter (KWOK provider) on that control
# plane. See docs/infrastructure.md.
#
#   infra.sh install [COMPONENT...]   fetch/build into ${EBB_CACHE:-~/.cache/ebb} (default: all five;
#                                     Karpenter's Go build runs in parallel with the others)
#   infra.sh up      [COMPONENT...]   install, start, wait until ready, write .infra/env.{sh,json}
#                                     (default: the test servers, without karpenter)
#   infra.sh down    [COMPONENT...]   stop (by pid); default: all; stopping kubernetes stops karpenter
#   infra.sh status  [COMPONENT...]   default: the test servers, and karpenter when it was started
#
# COMPONENT is one of: kafka postgres moto kubernetes karpenter.
set -euo pipefail
EBB_COMPONENT=infra
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=deploy/local/lib.sh
source "${HERE}/lib.sh"

ALL=(kafka postgres moto kubernetes karpenter)
# What `up` starts without arguments: the servers the test sessions reuse. Karpenter is opt-in
# (`up karpenter`): on the shared cluster its CRDs and controllers would change what the other
# integration tests see (the test session runs Karpenter on a control plane of its own).
SERVERS=(kafka postgres moto kubernetes)
# A component that needs another one up before it starts (started in a later phase; stopped first).
declare -A NEEDS=([karpenter]=kubernetes)

# components DEFAULT_ARRAY_NAME [COMPONENT...]: the named ones (checked), or the default list.
components() {
  local -n default="$1"
  shift
  if (($# == 0)); then
    printf '%s\n' "${default[@]}"
    return
  fi
  local c
  for c in "$@"; do
    [[ " ${ALL[*]} " == *" ${c} "* ]] || die "unknown component '${c}' (one of: ${ALL[*]})"
    printf '%s\n' "${c}"
  done
}

# in_order COMPONENT...: those of ALL that are named, in ALL's order, once each.
in_order() {
  local c
  for c in "${ALL[@]}"; do
    [[ " $* " == *" ${c} "* ]] && printf '%s\n' "${c}"
  done
  return 0
}

# install_all COMPONENT...: Karpenter's build (Go, minutes when cold) in the background while the
# others install one after the other (Kafka's Maven fetch, PostgreSQL's packages, the Kubernetes
# build): its downloads and the others' overlap. Its output goes to logs/karpenter-install.log.
install_all() {
  local c rc=0 background="" started=${SECONDS}
  local install_log="${EBB_LOG_DIR}/karpenter-install.log"
  if [[ " $* " == *" karpenter "* ]] && (($# > 1)); then
    "${HERE}/karpenter.sh" install >"${install_log}" 2>&1 &
    background=$!
    log "installing karpenter in the background (pid ${background}); log: ${install_log}"
  fi
  for c in "$@"; do
    [[ "${c}" == karpenter && -n "${background}" ]] && continue
    "${HERE}/${c}.sh" install || rc=$?
  done
  if [[ -n "${background}" ]]; then
    if wait "${background}"; then
      log "karpenter install done ($((SECONDS - started))s after the start of this install)"
    else
      rc=1
      tail -n 30 "${install_log}" >&2 || true
      log "karpenter install failed; see ${install_log}"
    fi
  fi
  return "${rc}"
}

# start_phase COMPONENT...: start them in parallel; each waits for its own readiness.
start_phase() {
  (($# > 0)) || return 0
  local c
  local -A jobs=()
  for c in "$@"; do
    "${HERE}/${c}.sh" start &
    jobs[${c}]=$!
  done
  failed=()
  for c in "${!jobs[@]}"; do
    wait "${jobs[${c}]}" || failed+=("${c}")
  done
  ((${#failed[@]} == 0))
}

cmd="${1:-}"
shift || true
case "${cmd}" in
  install)
    started=${SECONDS}
    mapfile -t comps < <(components ALL "$@")
    install_all "${comps[@]}"
    log "install done in $((SECONDS - started))s (cache: ${EBB_CACHE})"
    ;;
  up)
    started=${SECONDS}
    mapfile -t named < <(components SERVERS "$@")
    # with what they need (up karpenter: kubernetes too)
    for c in "${named[@]}"; do
      [[ -n "${NEEDS[${c}]:-}" ]] && named+=("${NEEDS[${c}]}")
    done
    mapfile -t comps < <(in_order "${named[@]}")
    install_all "${comps[@]}"
    first=() second=()
    for c in "${comps[@]}"; do
      if [[ -n "${NEEDS[${c}]:-}" ]]; then second+=("${c}"); else first+=("${c}"); fi
    done
    failed=()
    if ! start_phase "${first[@]}"; then
      log "failed to start: ${failed[*]}; logs are in ${EBB_LOG_DIR}"
      exit 1
    fi
    if ! start_phase "${second[@]}"; then
      log "failed to start: ${failed[*]}; logs are in ${EBB_LOG_DIR}"
      exit 1
    fi
    log "up in $((SECONDS - started))s; settings in ${EBB_INFRA_DIR}/env.sh and env.json:"
    grep '^export' "${EBB_INFRA_DIR}/env.sh" >&2 || true
    ;;
  down)
    mapfile -t named < <(components ALL "$@")
    # with what needs them (down kubernetes: karpenter first)
    for c in "${!NEEDS[@]}"; do
      [[ " ${named[*]} " == *" ${NEEDS[${c}]} "* ]] && named+=("${c}")
    done
    mapfile -t comps < <(in_order "${named[@]}")
    # stop in reverse order
    for ((i = ${#comps[@]} - 1; i >= 0; i--)); do
      "${HERE}/${comps[i]}.sh" stop
    done
    ;;
  status)
    defaults=("${SERVERS[@]}")
    [[ -s "$(pid_file karpenter)" ]] && defaults+=(karpenter)
    rc=0
    while read -r c; do
      "${HERE}/${c}.sh" status || rc=$?
    done < <(components defaults "$@")
    exit "${rc}"
    ;;
  *)
    echo "usage: $0 install|up|down|status [kafka|postgres|moto|kubernetes|karpenter ...]" >&2
    exit 2
    ;;
esac
