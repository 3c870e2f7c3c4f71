# shellcheck shell=bash disable=SC2034 # (the pinned versions are used by the scripts that source this)
# Shared helpers for the deploy/local scripts. Sourced, never run.
#
#   EBB_CACHE      where fetched/built binaries and jars live (outside the repo), one
#                  directory per <component>-<version>; default ~/.cache/ebb
#   EBB_INFRA_DIR  runtime state: data dirs, logs/, pids/, certs, kubeconfig, env files;
#                  default <repo>/.infra (git-ignored)

EBB_REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
EBB_CACHE="${EBB_CACHE:-${HOME}/.cache/ebb}"
EBB_INFRA_DIR="${EBB_INFRA_DIR:-${EBB_REPO_ROOT}/.infra}"
EBB_LOG_DIR="${EBB_INFRA_DIR}/logs"
EBB_PID_DIR="${EBB_INFRA_DIR}/pids"
export EBB_REPO_ROOT EBB_CACHE EBB_INFRA_DIR
export GOTOOLCHAIN=local UV_PYTHON_DOWNLOADS=never

# Pinned versions (one place; docs/infrastructure.md lists them too).
KAFKA_VERSION="${EBB_KAFKA_VERSION:-4.1.2}"
KAFKA_SCALA_VERSION="2.13"
LOG4J_VERSION="${EBB_LOG4J_VERSION:-2.24.3}"
KUBERNETES_VERSION="${EBB_KUBERNETES_VERSION:-v1.34.4}"
ETCD_VERSION="${EBB_ETCD_VERSION:-v3.6.4}"
KWOK_VERSION="${EBB_KWOK_VERSION:-v0.7.0}"
# the newest Karpenter release that builds with Go 1.26.8 (v1.14.3 and v1.15 need a newer Go)
KARPENTER_VERSION="${EBB_KARPENTER_VERSION:-v1.14.1}"
# the Helm client that installs charts/ebb (deploy/local/helm.sh; built with Go 1.26)
HELM_VERSION="${EBB_HELM_VERSION:-v3.22.0}"

mkdir -p "${EBB_CACHE}" "${EBB_LOG_DIR}" "${EBB_PID_DIR}"

log() { printf '[%s %s] %s\n' "$(date +%H:%M:%S)" "${EBB_COMPONENT:-infra}" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# A free TCP port on 127.0.0.1 (bind port 0 and let the kernel pick).
# free_port: a port nothing listens on, chosen below the kernel's ephemeral range (ip_local_port_range), where
# no outgoing connection is given one: a port the kernel hands out for port 0 is an ephemeral one, and between
# choosing it and the server's bind (the control plane's certificates take seconds) a client socket of another
# server starting meanwhile could take it ("bind: address already in use"). Servers start at once (the components
# of one test session, the control planes of a peer run), each choosing before any binds, so a port handed out is
# noted in a machine-wide register (EBB_PORT_REGISTER, under a lock) and not handed out again for ten minutes.
free_port() {
  python3 - "${EBB_PORT_REGISTER:-${TMPDIR:-/tmp}/ebb-ports}" <<'PY'
import fcntl, random, socket, sys, time
register, hold = sys.argv[1], 600.0
try:
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except (OSError, ValueError, IndexError):
    low = 32768
with open(register, "a+") as book:
    fcntl.flock(book, fcntl.LOCK_EX)
    book.seek(0)
    now, taken = time.time(), {}
    for line in book.read().split("\n"):
        fields = line.split()
        if len(fields) == 2 and fields[0].isdigit() and now - float(fields[1]) < hold:
            taken[int(fields[0])] = float(fields[1])
    chosen = None
    for _ in range(500):
        port = random.randrange(10000, max(low, 10001))
        if port in taken:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        chosen = port
        break
    if chosen is None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            chosen = s.getsockname()[1]
    taken[chosen] = now
    book.seek(0)
    book.truncate()
    book.write("".join(f"{p} {t}\n" for p, t in taken.items()))
print(chosen)
PY
}

pid_file() { printf '%s/%s.pid' "${EBB_PID_DIR}" "$1"; }
log_file() { printf '%s/%s.log' "${EBB_LOG_DIR}" "$1"; }

# is_running NAME: the pid in NAME's pid file is alive.
is_running() {
  local pf pid
  pf="$(pid_file "$1")"
  [[ -s "${pf}" ]] || return 1
  pid="$(cat "${pf}")"
  [[ "${pid}" =~ ^[0-9]+$ ]] && kill -0 "${pid}" 2>/dev/null
}

# spawn NAME CMD...: start CMD in the background, detached, output to logs/NAME.log,
# its pid in pids/NAME.pid.
spawn() {
  local name="$1"; shift
  local lf
  lf="$(log_file "${name}")"
  : >"${lf}"
  nohup setsid "$@" >>"${lf}" 2>&1 </dev/null &
  echo $! >"$(pid_file "${name}")"
  log "started ${name} (pid $!), log ${lf}"
}

# stop_pid NAME [SIGNAL]: stop the process whose pid is in pids/NAME.pid; wait up to 20 s,
# then SIGKILL. Only ever signals that one pid (never by name).
stop_pid() {
  stop_pids "${2:-TERM}" "$1"
}

# stop_pids SIGNAL NAME...: signal all of them at once, then wait for each (20 s, then SIGKILL).
stop_pids() {
  local sig="$1"; shift
  local name pf pid i
  local -a names=() pids=()
  for name in "$@"; do
    pf="$(pid_file "${name}")"
    [[ -s "${pf}" ]] || continue
    pid="$(cat "${pf}")"
    if [[ "${pid}" =~ ^[0-9]+$ ]] && kill -0 "${pid}" 2>/dev/null; then
      kill "-${sig}" "${pid}" 2>/dev/null || true
      names+=("${name}")
      pids+=("${pid}")
    else
      rm -f "${pf}"
    fi
  done
  for i in "${!pids[@]}"; do
    local deadline=$((SECONDS + 20))
    while kill -0 "${pids[i]}" 2>/dev/null && ((SECONDS < deadline)); do
      sleep 0.1
    done
    if kill -0 "${pids[i]}" 2>/dev/null; then
      log "${names[i]} (pid ${pids[i]}) did not stop after SIG${sig}; sending SIGKILL"
      kill -KILL "${pids[i]}" 2>/dev/null || true
      sleep 0.5
    fi
    log "stopped ${names[i]} (pid ${pids[i]})"
    rm -f "$(pid_file "${names[i]}")"
  done
}

# wait_until NAME TIMEOUT_SECONDS CMD...: poll CMD until it succeeds; fail with a pointer to
# NAME's log if TIMEOUT passes or the process dies first.
wait_until() {
  local name="$1" timeout="$2"; shift 2
  local deadline=$((SECONDS + timeout))
  while ! "$@" >/dev/null 2>&1; do
    if ! is_running "${name}"; then
      tail -n 30 "$(log_file "${name}")" >&2 || true
      die "${name} exited before it became ready; see $(log_file "${name}")"
    fi
    if ((SECONDS >= deadline)); then
      tail -n 30 "$(log_file "${name}")" >&2 || true
      die "${name} not ready after ${timeout}s; see $(log_file "${name}")"
    fi
    sleep 0.5
  done
  log "${name} is ready"
}

tcp_open() {
  python3 - "$1" "$2" <<'EOF'
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1)
s.close()
EOF
}

# write_component_env COMPONENT KEY=VALUE...: the component's connection settings, merged
# into env.sh / env.json by write_env_files.
write_component_env() {
  local comp="$1"; shift
  local f="${EBB_INFRA_DIR}/${comp}.env"
  printf '%s\n' "$@" >"${f}.tmp"
  mv "${f}.tmp" "${f}"
  write_env_files
}

remove_component_env() {
  rm -f "${EBB_INFRA_DIR}/$1.env"
  write_env_files
}

# env.sh (export lines) and env.json from every running component's .env file.
write_env_files() {
  python3 - "${EBB_INFRA_DIR}" <<'EOF'
import fcntl, json, os, pathlib, shlex, sys
infra = pathlib.Path(sys.argv[1])
# components may start in parallel: one writer at a time, each from all the .env files
lock = open(infra / ".env.lock", "w")
fcntl.flock(lock, fcntl.LOCK_EX)
settings: dict[str, str] = {}
for comp in ("kafka", "postgres", "kubernetes", "moto", "karpenter"):
    f = infra / f"{comp}.env"
    if not f.exists():
        continue
    for line in f.read_text().splitlines():
        if "=" in line:
            key, value = line.split("=", 1)
            settings[key] = value
tmp = infra / f"env.json.{os.getpid()}"
tmp.write_text(json.dumps(settings, indent=2, sort_keys=True) + "\n")
tmp.replace(infra / "env.json")
lines = ["# generated by deploy/local; source it: . .infra/env.sh"]
lines += [f"export {k}={shlex.quote(v)}" for k, v in sorted(settings.items())]
tmp = infra / f"env.sh.{os.getpid()}"
tmp.write_text("\n".join(lines) + "\n")
tmp.replace(infra / "env.sh")
EOF
}

# need_cmd CMD [HINT]
need_cmd() {
  command -v "$1" >/dev/null 2>&1 || die "'$1' not found on PATH${2:+ ($2)}"
}

# apt_install PKG...: install Debian packages when running as root (apt-get update once).
apt_install() {
  if [[ "$(id -u)" != 0 ]]; then
    die "missing system packages: $*; install them (apt-get install $*) and retry"
  fi
  if [[ ! -e /tmp/.ebb-apt-updated ]]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    touch /tmp/.ebb-apt-updated
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
}

# go_bin: the Go toolchain (PATH or /usr/local/go).
go_bin() {
  if command -v go >/dev/null 2>&1; then
    command -v go
  elif [[ -x /usr/local/go/bin/go ]]; then
    echo /usr/local/go/bin/go
  else
    die "Go toolchain not found (install Go >= 1.24 into /usr/local/go)"
  fi
}

# The status line of a one-process component, with the setting named $2 from its env file.
single_status() {
  local name=$1 key=$2
  if is_running "${name}"; then
    echo "${name}: running (pid $(cat "$(pid_file "${name}")")) $(grep -h "^${key}=" "${EBB_INFRA_DIR}/${name}.env" 2>/dev/null | head -n1)"
  else
    echo "${name}: stopped"
    return 1
  fi
}

# A component script's entry point: run its install, start, stop or status function.
component_main() {
  case "${1:-}" in
    install | start | stop | status) "$1" ;;
    *) echo "usage: $0 install|start|stop|status" >&2; exit 2 ;;
  esac
}
