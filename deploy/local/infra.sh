#!/usr/bin/env bash
# ebb's real local infrastructure, without Docker: Kafka (KRaft), PostgreSQL, a Kubernetes
# control plane with KWOK, and moto (SQS/EC2). See docs/infrastructure.md.
#
#   infra.sh install [COMPONENT...]   fetch/build everything into ${EBB_CACHE:-~/.cache/ebb}
#   infra.sh up      [COMPONENT...]   install, start, wait until ready, write .infra/env.{sh,json}
#   infra.sh down    [COMPONENT...]   stop (by pid)
#   infra.sh status  [COMPONENT...]
#
# COMPONENT is one of: kafka postgres kubernetes moto (default: all).
set -euo pipefail
EBB_COMPONENT=infra
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=deploy/local/lib.sh
source "${HERE}/lib.sh"

ALL=(kafka postgres moto kubernetes)

components() {
  if (($# == 0)); then
    printf '%s\n' "${ALL[@]}"
    return
  fi
  local c
  for c in "$@"; do
    [[ " ${ALL[*]} " == *" ${c} "* ]] || die "unknown component '${c}' (one of: ${ALL[*]})"
    printf '%s\n' "${c}"
  done
}

run_each() {
  local action="$1"; shift
  local c rc=0
  while read -r c; do
    "${HERE}/${c}.sh" "${action}" || rc=$?
  done < <(components "$@")
  return "${rc}"
}

cmd="${1:-}"
shift || true
case "${cmd}" in
  install)
    started=${SECONDS}
    run_each install "$@"
    log "install done in $((SECONDS - started))s (cache: ${EBB_CACHE})"
    ;;
  up)
    started=${SECONDS}
    run_each install "$@"
    # start the components in parallel; each waits for its own readiness
    declare -A jobs=()
    while read -r c; do
      "${HERE}/${c}.sh" start &
      jobs[${c}]=$!
    done < <(components "$@")
    failed=()
    for c in "${!jobs[@]}"; do
      wait "${jobs[${c}]}" || failed+=("${c}")
    done
    if ((${#failed[@]})); then
      log "failed to start: ${failed[*]}; logs are in ${EBB_LOG_DIR}"
      exit 1
    fi
    log "up in $((SECONDS - started))s; settings in ${EBB_INFRA_DIR}/env.sh and env.json:"
    grep '^export' "${EBB_INFRA_DIR}/env.sh" >&2 || true
    ;;
  down)
    # stop in reverse order
    mapfile -t comps < <(components "$@")
    for ((i = ${#comps[@]} - 1; i >= 0; i--)); do
      "${HERE}/${comps[i]}.sh" stop
    done
    ;;
  status)
    run_each status "$@"
    ;;
  *)
    echo "usage: $0 install|up|down|status [kafka|postgres|moto|kubernetes ...]" >&2
    exit 2
    ;;
esac
