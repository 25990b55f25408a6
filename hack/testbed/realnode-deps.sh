#!/usr/bin/env bash
# Installs the Debian packages that the test bed's real kubelet nodes need (see
# test/testbed/realnode.go): containerd and runc (the container runtime), the CNI plugins
# (bridge, host-local, loopback) and a static busybox (the shell image's only binary).
#
# Idempotent: installs only what is missing, runs `apt-get update` only when an install is
# needed. A machine where they cannot be installed (not root, not Debian, no apt) gets one line
# saying why on stderr, and the real-node tests skip with the same reason
# (test/testbed.RealNodeSupport); the script then exits 0, except where real nodes are
# required (CI=true or DBOPS_REQUIRE_REAL_NODES=1, test/testbed.RealNodesRequired): there
# it exits 1, and the real-node tests would fail.
#
# Environment:
#   DBOPS_REALNODE_DEPS=skip   do not install anything (the real-node tests then skip if missing)
set -uo pipefail

PACKAGES=(containerd runc containernetworking-plugins busybox-static)

log() { printf '[realnode-deps.sh] %s\n' "$*" >&2; }
required() { [[ "${CI:-}" == true || "${DBOPS_REQUIRE_REAL_NODES:-}" == 1 ]]; }
# disabled logs why real nodes cannot run and exits: 1 where they are required, else 0.
disabled() {
  if required; then
    log "real nodes unavailable, and required (CI=true or DBOPS_REQUIRE_REAL_NODES=1): $*"
    exit 1
  fi
  log "real nodes disabled: $* (real-node e2e tests will skip)"
  exit 0
}

if [[ "${DBOPS_REALNODE_DEPS:-}" == skip ]]; then
  log "DBOPS_REALNODE_DEPS=skip: not installing ${PACKAGES[*]}"
  exit 0
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi
if [[ "$(id -u)" != 0 ]]; then
  disabled "not root, cannot install ${missing[*]}"
fi
if ! command -v apt-get >/dev/null; then
  disabled "no apt-get to install ${missing[*]}"
fi

log "installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Serialise with other test runs installing at the same time (dpkg has its own lock, but a
# second apt-get would fail on it instead of waiting).
exec 8>/tmp/kubectl-dbops-realnode-deps.lock
command -v flock >/dev/null && flock 8
try_install() {
  apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
}
if ! try_install; then
  log "apt-get install failed; running apt-get update first"
  if ! apt-get update -q >&2 || ! try_install; then
    disabled "apt-get could not install ${missing[*]}"
  fi
fi
# The containerd package enables a system service; the test bed runs its own containerds
# with private sockets and state, and a system one would only use memory.
if command -v systemctl >/dev/null && [[ -d /run/systemd/system ]]; then
  systemctl disable --now containerd >/dev/null 2>&1 || true
fi
log "installed ${missing[*]}"
