#!/usr/bin/env bash
# mmdebstrap's customize hook (deploy/image/build.sh): install the project into the root filesystem ROOT as the
# Dockerfile does, /app/.venv on Debian's /usr/bin/python3.11, with uv run inside the chroot (so the virtualenv's
# paths and its scripts' shebangs are the image's own). The third-party distributions are uv.lock's, by hash
# (WORK/requirements.txt, `uv export`), the workspace's are WORK/wheels/*.whl (`uv build`); neither resolves
# anything (--no-deps). uv's cache is bind-mounted in a mount namespace of this hook's own, so the mount ends with
# it whatever happens: the wheels come from it when it holds them (--offline), else from the index.
#
#   install-app.sh ROOT WORK UV
set -euo pipefail
root="$1" work="$2" uv="$3"
cache="$("${uv}" cache dir)"
mkdir -p "${root}/tmp/ebb/uv-cache" "${cache}"
cp "${uv}" "${root}/tmp/ebb/uv"
cp -r "${work}/wheels" "${work}/requirements.txt" "${root}/tmp/ebb/"
# the host's CA bundle (the one SSL_CERT_FILE names, else Debian's): behind a proxy that re-signs TLS, uv reaches the
# index only with the proxy's authority, which the image's own bundle does not have; it goes with /tmp/ebb (the image
# is the same)
certs="" host_certs="${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}"
if [[ -r "${host_certs}" ]]; then
  cp "${host_certs}" "${root}/tmp/ebb/ca-certificates.crt"
  certs=/tmp/ebb/ca-certificates.crt
fi

# the environment of every command in the chroot: nothing of the host's but the epoch (bytecode with hashes, not
# times, when SOURCE_DATE_EPOCH is set) and the CA bundle above
run() {
  chroot "${root}" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp LANG=C.UTF-8 \
    UV_CACHE_DIR=/tmp/ebb/uv-cache UV_PYTHON_DOWNLOADS=never UV_LINK_MODE=copy UV_COMPILE_BYTECODE=1 \
    UV_NO_PROGRESS=1 SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH}" PYTHONHASHSEED=0 ${certs:+SSL_CERT_FILE="${certs}"} \
    /tmp/ebb/uv "$@"
}
install_offline_else_online() {
  run pip install --quiet --python /app/.venv/bin/python --no-deps "$@" --offline 2>/dev/null \
    || run pip install --quiet --python /app/.venv/bin/python --no-deps "$@"
}
export -f run install_offline_else_online
export root SOURCE_DATE_EPOCH certs

unshare --mount --propagation private bash -euo pipefail -c '
  mount --bind "$1" "${root}/tmp/ebb/uv-cache"
  run venv --quiet --python /usr/bin/python3.11 /app/.venv
  install_offline_else_online --require-hashes -r /tmp/ebb/requirements.txt
  install_offline_else_online "${@:2}"
' install "${cache}" $(cd "${work}" && printf '/tmp/ebb/%s ' wheels/*.whl)

# uv notes a time of each local wheel in the dist-info it installs (uv_cache.json, listed in RECORD; not the file's
# mtime: a wheel touched to the epoch still gets the time of the build): the only bytes two builds of the same inputs
# differed by. It tells uv whether to reinstall the wheel; nothing in the image runs uv.
for noted in "${root}"/app/.venv/lib/python3.11/site-packages/*.dist-info/uv_cache.json; do
  [[ -e "${noted}" ]] || continue
  rm "${noted}"
  sed -i '/\.dist-info\/uv_cache\.json,/d' "$(dirname "${noted}")/RECORD"
done
rm -rf "${root}/tmp/ebb" "${root}/app/.venv/.lock"
