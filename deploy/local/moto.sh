#!/usr/bin/env bash
# A local moto server (simulated AWS: SQS, EC2, ...) from the project's venv.
#
#   moto.sh install   check that the venv has moto_server (`uv sync` installs moto[server])
#   moto.sh start     start on a free port, wait until it answers, write env
#   moto.sh stop
#   moto.sh status
set -euo pipefail
EBB_COMPONENT=moto
# shellcheck source=deploy/local/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

MOTO_SERVER="${EBB_MOTO_SERVER:-${EBB_REPO_ROOT}/.venv/bin/moto_server}"

install() {
  if [[ ! -x "${MOTO_SERVER}" ]]; then
    need_cmd uv "pip install uv"
    log "moto_server not in the venv; running uv sync"
    (cd "${EBB_REPO_ROOT}" && uv sync --quiet)
  fi
  [[ -x "${MOTO_SERVER}" ]] || die "${MOTO_SERVER} missing (moto[server] is a dev dependency; run uv sync)"
}

moto_ready() {
  python3 - "$1" <<'EOF'
import sys, urllib.request
urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/moto-api/data.json", timeout=2).read()
EOF
}

start() {
  install
  if is_running moto; then
    log "already running (pid $(cat "$(pid_file moto)"))"
    return 0
  fi
  local port
  port="$(free_port)"
  spawn moto "${MOTO_SERVER}" -H 127.0.0.1 -p "${port}"
  wait_until moto "${MOTO_START_TIMEOUT:-60}" moto_ready "${port}"
  write_component_env moto "MOTO_ENDPOINT=http://127.0.0.1:${port}" \
    "AWS_ENDPOINT_URL=http://127.0.0.1:${port}" "AWS_DEFAULT_REGION=us-east-1" \
    "AWS_ACCESS_KEY_ID=testing" "AWS_SECRET_ACCESS_KEY=testing"
}

stop() {
  stop_pid moto TERM
  remove_component_env moto
}

status() { single_status moto MOTO_ENDPOINT; }

component_main "$@"
