#!/usr/bin/env bash
# A local PostgreSQL for ebb (Debian's packaged server binaries, its own data dir under
# .infra — not the system service). Trust auth on 127.0.0.1, database `ebb`, role `ebb`.
#
#   postgres.sh install   apt-get install postgresql when no initdb is found
#   postgres.sh start     fresh data dir (initdb), start on a free port, create role + db
#   postgres.sh stop
#   postgres.sh status
set -euo pipefail
EBB_COMPONENT=postgres
# shellcheck source=deploy/local/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

STATE="${EBB_INFRA_DIR}/postgres"
DB_NAME=ebb
DB_USER=ebb
DB_PASSWORD=ebb

pg_bindir() {
  local d
  # newest installed major version first
  for d in $(printf '%s\n' /usr/lib/postgresql/*/bin | sort -t/ -k5 -n -r); do
    if [[ -x "${d}/initdb" && -x "${d}/postgres" ]]; then
      echo "${d}"
      return 0
    fi
  done
  if command -v initdb >/dev/null 2>&1 && command -v postgres >/dev/null 2>&1; then
    dirname "$(command -v initdb)"
    return 0
  fi
  return 1
}

install() {
  if ! pg_bindir >/dev/null; then
    log "PostgreSQL server binaries not found; installing the Debian packages"
    apt_install postgresql postgresql-client
  fi
  local bindir
  bindir="$(pg_bindir)" || die "PostgreSQL still not found after install"
  log "PostgreSQL: $("${bindir}/postgres" --version)"
  if [[ "$(id -u)" == 0 ]] && ! id postgres >/dev/null 2>&1; then
    # initdb and postgres refuse to run as root.
    useradd --system --home-dir /var/lib/postgresql --shell /usr/sbin/nologin postgres
  fi
}

# As root, run as the `postgres` user; setpriv execs (no fork), so the pid stays true.
AS_PG=()
if [[ "$(id -u)" == 0 ]]; then
  AS_PG=(setpriv --reuid=postgres --regid=postgres --init-groups --reset-env --)
fi
run_pg() { "${AS_PG[@]}" "$@"; }

pg_ready() {
  "$1/pg_isready" -q -h 127.0.0.1 -p "$2" -U postgres -d postgres
}

start() {
  install
  if is_running postgres; then
    log "already running (pid $(cat "$(pid_file postgres)"))"
    return 0
  fi
  local bindir port
  bindir="$(pg_bindir)"
  port="$(free_port)"
  if [[ -s "${STATE}/datadir" ]]; then
    rm -rf "$(cat "${STATE}/datadir")" # an earlier run's data dir outside .infra (see below)
  fi
  rm -rf "${STATE}"
  mkdir -p "${STATE}"
  local data="${STATE}/data"
  if [[ "$(id -u)" == 0 ]]; then
    chown postgres: "${STATE}"
    if ! run_pg test -w "${STATE}"; then
      # e.g. a checkout under /root: the postgres user cannot reach it
      data="$(mktemp -d "${TMPDIR:-/tmp}/ebb-postgres.XXXXXX")/data"
      chown postgres: "$(dirname "${data}")"
      dirname "${data}" >"${STATE}/datadir"
      log "user postgres cannot reach ${STATE}; data dir ${data}"
    fi
  fi
  run_pg "${bindir}/initdb" -D "${data}" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 \
    >"$(log_file postgres-initdb)" 2>&1 \
    || { tail -n 20 "$(log_file postgres-initdb)" >&2; die "initdb failed; see $(log_file postgres-initdb)"; }
  cat >>"${data}/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
port = ${port}
unix_socket_directories = ''
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 200
EOF
  # host-based auth: trust on loopback only
  printf 'host all all 127.0.0.1/32 trust\n' >"${data}/pg_hba.conf"
  spawn postgres "${AS_PG[@]}" "${bindir}/postgres" -D "${data}"
  wait_until postgres "${POSTGRES_START_TIMEOUT:-60}" pg_ready "${bindir}" "${port}"
  "${bindir}/psql" -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "${port}" -U postgres -d postgres \
    -c "CREATE ROLE ${DB_USER} LOGIN PASSWORD '${DB_PASSWORD}'" \
    -c "CREATE DATABASE ${DB_NAME} OWNER ${DB_USER}" >/dev/null
  local url="postgresql+asyncpg://${DB_USER}:${DB_PASSWORD}@127.0.0.1:${port}/${DB_NAME}"
  write_component_env postgres "DATABASE_URL=${url}" "EBB_DATABASE_URL=${url}" \
    "PGHOST=127.0.0.1" "PGPORT=${port}" "PGUSER=${DB_USER}" "PGDATABASE=${DB_NAME}"
}

stop() {
  # SIGINT is PostgreSQL's "fast" shutdown
  stop_pid postgres INT
  remove_component_env postgres
}

status() { single_status postgres DATABASE_URL; }

component_main "$@"
