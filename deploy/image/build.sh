#!/usr/bin/env bash
# ebb's container image, built without a Docker engine and without pulling a base image: Debian's packages
# (mmdebstrap, --variant=essential plus Python 3.11, the C++ runtime and the CA certificates, at the versions of
# packages.lock) and the project's wheels (uv build; third parties at uv.lock's versions and hashes) in one layer,
# written as an OCI archive by oci.py. The same inputs give the same bytes, so the same digest (SOURCE_DATE_EPOCH:
# the time of the last commit that changed them). The layout is the Dockerfile's: /app/.venv, `ebb` and
# `python -m ebb_<service>` on the PATH, uid/gid 65532, working directory /app, command `ebb --help`.
#
#   build.sh build    build the image (or find it in the cache) and print its archive's path, then its digest
#   build.sh path     the archive's path alone (built first if needed)
#   build.sh digest   the digest alone (built first if needed)
#   build.sh lock     rebuild with Debian's current versions and write them to packages.lock (after a Debian point
#                     release or a security update removed a locked version from the mirror)
#   build.sh docs     write the digest into docs/deploy.md ("The image"), after a change to an input
#
# The archive is cached in ${EBB_CACHE:-~/.cache/ebb}/image/<key>/ (ebb.oci.tar, digest, packages), the key a hash
# of every input: the wheels, the locked requirements, packages.lock, these scripts, uv's version and the epoch.
# Loading it: `skopeo copy oci-archive:PATH docker://REGISTRY/ebb:TAG` or `podman load -i PATH` (docs/deploy.md).
# Needs (Debian): mmdebstrap, uv; root (mmdebstrap's root mode, chroot, a bind mount in a mount namespace).
set -euo pipefail
EBB_COMPONENT=image
# shellcheck source=deploy/local/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../local/lib.sh"

HERE="${EBB_REPO_ROOT}/deploy/image"
NAME="${EBB_IMAGE_NAME:-ghcr.io/ebb-sh/ebb:0.1.0}"
SUITE=bookworm
MIRROR="${EBB_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SECURITY_MIRROR="${EBB_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
# what the image adds to Debian's essential set; their dependencies come with them (all locked in packages.lock).
# libstdc++6: compiled extensions of the wheels link it (greenlet, which SQLAlchemy's asyncio needs, among them)
PACKAGES=(python3.11 ca-certificates libstdc++6)
# the image's config: the Dockerfile's user, environment, working directory and command
CONFIG='{"User":"65532:65532","WorkingDir":"/app","Cmd":["ebb","--help"],
  "Env":["PATH=/app/.venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin","LANG=C.UTF-8",
         "PYTHONUNBUFFERED=1","PYTHONDONTWRITEBYTECODE=1"],
  "Labels":{"org.opencontainers.image.source":"https://github.com/ebb-sh/ebb","org.opencontainers.image.title":"ebb"}}'

# uv's binary: the one running us (`uv run` sets UV), else the PATH's, else pip's (`pip install uv`); a script (pyenv's
# shim) will not run in the chroot
uv_of_pip() { python3.11 -c 'import uv; print(uv.find_uv_bin())' 2>/dev/null || true; }
UV="${UV:-}"
[[ -x "${UV}" ]] || UV="$(command -v uv || true)"
if [[ -n "${UV}" && "$(head -c2 "${UV}")" == "#!" ]]; then
  UV="$(pyenv which uv 2>/dev/null || uv_of_pip)"
fi
[[ -x "${UV}" ]] || UV="$(uv_of_pip)"
[[ -n "${UV}" && -x "${UV}" ]] || die "uv is needed (make install installs it)"

# the time of the last commit that changed an input (its author's: a rebase or a cherry-pick keeps it); files' times
# in the image are clamped to it
epoch() {
  local at
  at="$(git -C "${EBB_REPO_ROOT}" log -1 --format=%at -- libs services apps uv.lock pyproject.toml deploy/image \
    2>/dev/null || true)"
  printf '%s' "${SOURCE_DATE_EPOCH:-${at:-0}}"
}

# WORK/wheels (one per workspace member) and WORK/requirements.txt (uv.lock's third parties with their hashes)
inputs() {
  local work="$1" member
  mkdir -p "${work}/wheels"
  for member in libs/* services/* apps/*; do
    [[ -f "${EBB_REPO_ROOT}/${member}/pyproject.toml" ]] || continue
    (cd "${EBB_REPO_ROOT}" && { "${UV}" build --quiet --offline --wheel --out-dir "${work}/wheels" "${member}" \
      2>/dev/null || "${UV}" build --quiet --wheel --out-dir "${work}/wheels" "${member}"; })
  done
  (cd "${EBB_REPO_ROOT}" && "${UV}" export --quiet --frozen --no-dev --no-emit-workspace --no-header \
    --format requirements-txt) >"${work}/requirements.txt"
}

key() {
  local work="$1"
  {
    (cd "${work}" && sha256sum wheels/*.whl requirements.txt)
    (cd "${HERE}" && sha256sum build.sh install-app.sh oci.py packages.lock 2>/dev/null || true)
    "${UV}" --version
    printf 'epoch %s name %s suite %s packages %s\n' "${SOURCE_DATE_EPOCH}" "${NAME}" "${SUITE}" "${PACKAGES[*]}"
  } | sha256sum | cut -c1-16
}

# mmdebstrap: the root filesystem as a tar (sorted, times clamped to the epoch), the app installed by a hook
rootfs() {
  local work="$1" relock="$2" q_work q_here q_uv
  printf -v q_work '%q' "${work}"
  printf -v q_here '%q' "${HERE}"
  printf -v q_uv '%q' "${UV}"
  local pins=()
  if [[ "${relock}" == 0 ]]; then
    [[ -s "${HERE}/packages.lock" ]] || die "no ${HERE}/packages.lock: run '$0 lock' first"
    # every package at its locked version (apt prefers a pinned version to a newer one)
    awk '{ printf "Package: %s\nPin: version %s\nPin-Priority: 1001\n\n", $1, $2 }' "${HERE}/packages.lock" \
      >"${work}/preferences"
    pins=(--setup-hook="mkdir -p \"\$1/etc/apt/preferences.d\""
          --setup-hook="cp ${q_work}/preferences \"\$1/etc/apt/preferences.d/ebb\"")
  fi
  mmdebstrap --quiet --variant=essential --mode=root --format=tar --architectures=amd64 \
    --include="$(IFS=,; echo "${PACKAGES[*]}")" \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    "${pins[@]}" \
    --customize-hook="dpkg-query --admindir=\"\$1/var/lib/dpkg\" -W -f='\${Package} \${Version}\n' \
      | sort >${q_work}/packages" \
    --customize-hook="SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH} ${q_here}/install-app.sh \"\$1\" ${q_work} ${q_uv}" \
    --customize-hook='rm -f "$1/etc/apt/preferences.d/ebb" "$1/etc/resolv.conf" "$1/etc/hostname"' \
    --customize-hook='mkdir -p "$1/tmp" && chmod 1777 "$1/tmp"' \
    "${SUITE}" "${work}/rootfs.tar" \
    "deb ${MIRROR} ${SUITE} main" "deb ${MIRROR} ${SUITE}-updates main" "deb ${SECURITY_MIRROR} ${SUITE}-security main"
  if [[ "${relock}" == 0 ]] && ! diff -u "${HERE}/packages.lock" "${work}/packages" >&2; then
    die "the mirror no longer has every version of packages.lock (above: - locked, + installed);" \
      "'$0 lock' locks the new ones"
  fi
}

# build [relock]: the archive in the cache; prints its path and its digest. Relocking builds the root filesystem
# first, with Debian's current versions, and writes packages.lock before the key (which covers it) is taken.
build() {
  local relock="${1:-0}" out lock started=${SECONDS}
  export SOURCE_DATE_EPOCH
  SOURCE_DATE_EPOCH="$(epoch)"
  command -v mmdebstrap >/dev/null || die "mmdebstrap is needed: apt-get install mmdebstrap"
  [[ "$(id -u)" == 0 ]] || die "mmdebstrap's root mode, chroot and mount need root"
  work="$(mktemp -d "${TMPDIR:-/tmp}/ebb-image.XXXXXX")"  # global: the EXIT trap removes it
  trap 'rm -rf "${work}"' EXIT
  inputs "${work}"
  if [[ "${relock}" == 1 ]]; then
    log "building the root filesystem with Debian's current versions, to lock them"
    rootfs "${work}" 1
    cp "${work}/packages" "${HERE}/packages.lock"
    log "wrote ${HERE}/packages.lock"
  fi
  out="${EBB_CACHE}/image/$(key "${work}")"
  mkdir -p "${out}"
  exec {lock}>"${out}/.build.lock"
  flock "${lock}"  # one build per key at a time (CI's step and a test session may race)
  if [[ -s "${out}/digest" && -s "${out}/ebb.oci.tar" ]]; then
    log "cached: ${out}"
  else
    log "building ${NAME} (epoch ${SOURCE_DATE_EPOCH}) in ${work}"
    # not `[[ ... ]] || rootfs`: a function called in a || list runs without errexit, and a failed hook left a tar
    # of nothing that was archived and cached as the image
    if [[ ! -f "${work}/rootfs.tar" ]]; then
      rootfs "${work}" 0
    fi
    python3 "${HERE}/oci.py" "${work}/rootfs.tar" "${out}/ebb.oci.tar" --name "${NAME}" \
      --epoch "${SOURCE_DATE_EPOCH}" --config "${CONFIG}" >"${out}/digest.partial"
    cp "${work}/packages" "${out}/packages"
    mv "${out}/digest.partial" "${out}/digest"
    log "built in $((SECONDS - started))s: $(du -h "${out}/ebb.oci.tar" | cut -f1), $(cat "${out}/digest")"
    # the archives of older inputs: the newest few stay (another checkout may be building or testing one)
    ls -1dt "${EBB_CACHE}/image"/*/ | tail -n +5 | xargs -r rm -rf
  fi
  exec {lock}>&-
  printf '%s\n%s\n' "${out}/ebb.oci.tar" "$(cat "${out}/digest")"
}

case "${1:-build}" in
  build) build 0 ;;
  path) build 0 | sed -n 1p ;;
  digest) build 0 | sed -n 2p ;;
  lock) build 1 ;;
  docs)
    digest="$(build 0 | sed -n 2p)"
    sed -i -E "s/^\`sha256:[0-9A-Za-z_]+\`/\`${digest}\`/" "${EBB_REPO_ROOT}/docs/deploy.md"
    grep -q "^\`${digest}\`" "${EBB_REPO_ROOT}/docs/deploy.md" \
      || die "docs/deploy.md has no line that starts with \`sha256:...\`"
    log "docs/deploy.md names ${digest}"
    ;;
  *) die "usage: $0 build|path|digest|lock|docs" ;;
esac
