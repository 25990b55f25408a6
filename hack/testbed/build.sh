#!/usr/bin/env bash
# Builds the local Kubernetes testbed binaries (kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, etcd, etcdctl, kwok, and for the real nodes kubelet and CoreDNS) from the Go
# module proxy into a versioned cache folder outside the repository. See
# /work/shared/docs/testbed.md and realnode.md for the recipes this follows.
#
# Idempotent: when every binary is already present it only prints the bin dir.
# The last line printed on stdout is always the bin dir path.
#
# Environment:
#   DBOPS_TESTBED_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-dbops/testbed)
#   DBOPS_TESTBED_NICE   niceness for the compilers (default 10) so parallel builds of others are not starved
set -euo pipefail

K8S_VERSION=v1.36.3
K8S_STAGING_VERSION=v0.36.3
ETCD_VERSION=v3.6.8
KWOK_VERSION=v0.8.0
# CoreDNS serves Service and StatefulSet pod names to the real nodes' pods. Its version is not
# part of KEY (older caches just lack the binary and get it built); keep it in step with
# test/testbed/binaries.go.
COREDNS_VERSION=v1.14.7

CACHE_ROOT="${DBOPS_TESTBED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-dbops/testbed}"
KEY="k8s-${K8S_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}"
BASE="${CACHE_ROOT}/${KEY}"
BIN="${BASE}/bin"
NICE="${DBOPS_TESTBED_NICE:-10}"

BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd etcdctl kwok kubelet coredns)

log() { printf '[build.sh] %s\n' "$*" >&2; }

all_present() {
  local b
  for b in "${BINARIES[@]}"; do
    [[ -x "${BIN}/${b}" ]] || return 1
  done
}

if all_present; then
  printf '%s\n' "${BIN}"
  exit 0
fi

command -v go >/dev/null || { log "go is not on PATH"; exit 1; }
mkdir -p "${BIN}" "${BASE}/src"

# Serialise concurrent builds (e.g. two test packages starting at once) on one lock file.
exec 9>"${BASE}/build.lock"
if command -v flock >/dev/null; then
  flock 9
fi
if all_present; then
  printf '%s\n' "${BIN}"
  exit 0
fi

# Build into a temp dir next to BIN and move into place, so an interrupted build never leaves
# a half-written binary that all_present would accept.
STAGE_DIR="$(mktemp -d "${BASE}/bin.tmp.XXXXXX")"
trap 'rm -rf "${STAGE_DIR}"' EXIT

export GOFLAGS="-buildvcs=false"
export GOWORK=off
export CGO_ENABLED=0
gobuild() { nice -n "${NICE}" go "$@"; }

# kubectl: the e2e tests run the plugin through kubectl's plugin lookup, at the control
# plane's version, whatever kubectl the machine has (or none).
K8S_CMDS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)

build_k8s() {
  local need=() b
  for b in "${K8S_CMDS[@]}"; do
    [[ -x "${BIN}/${b}" ]] || need+=("${b}")
  done
  [[ ${#need[@]} -gt 0 ]] || return 0

  # One scratch module for all Kubernetes commands; it is kept (marker file) so that a cache
  # made before kubectl was added only needs the module resolved again for kubectl's
  # dependencies and kubectl compiled, not the rest.
  local dir="${BASE}/src/k8s"
  if [[ ! -f "${dir}/.ready-kubectl" ]]; then
    rm -rf "${dir}" && mkdir -p "${dir}"
    log "downloading k8s.io/kubernetes@${K8S_VERSION} (large module, first time only)"
    local moddir
    moddir="$(cd "${dir}" && go mod download -json "k8s.io/kubernetes@${K8S_VERSION}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
    [[ -n "${moddir}" && -f "${moddir}/go.mod" ]] || { log "cannot locate k8s.io/kubernetes module dir"; exit 1; }

    # k8s.io/kubernetes points its staging modules at ./staging/...; a consumer must replace each
    # of them with the published v0.x tag of the same release.
    local staging
    staging="$(sed -n 's#^[[:space:]]*\(k8s\.io/[^[:space:]]*\)[[:space:]]*=>[[:space:]]*\./staging/.*#\1#p' "${moddir}/go.mod" | sort -u)"
    [[ -n "${staging}" ]] || { log "no staging replace lines found in ${moddir}/go.mod"; exit 1; }

    (
      cd "${dir}"
      go mod init dbops-testbed-k8s >/dev/null 2>&1
      local args=() m tools=()
      for m in ${staging}; do
        args+=("-replace=${m}=${m}@${K8S_STAGING_VERSION}")
      done
      go mod edit -go=1.26 -require="k8s.io/kubernetes@${K8S_VERSION}" "${args[@]}"
      for m in "${K8S_CMDS[@]}"; do
        tools+=("k8s.io/kubernetes/cmd/${m}@${K8S_VERSION}")
      done
      log "resolving kubernetes dependencies"
      go get -tool "${tools[@]}" >&2
    )
    touch "${dir}/.ready-kubectl"
  fi
  (
    cd "${dir}"
    local minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
    local ld="-s -w"
    ld+=" -X k8s.io/component-base/version.gitVersion=${K8S_VERSION}"
    ld+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${minor}"
    ld+=" -X k8s.io/component-base/version.gitTreeState=clean"
    ld+=" -X k8s.io/client-go/pkg/version.gitVersion=${K8S_VERSION}"
    local pkgs=() b
    for b in "${need[@]}"; do
      pkgs+=("k8s.io/kubernetes/cmd/${b}")
    done
    log "compiling ${need[*]} (several minutes)"
    gobuild build -trimpath -ldflags "${ld}" -o "${STAGE_DIR}/" "${pkgs[@]}" >&2
  )
  for b in "${need[@]}"; do
    mv -f "${STAGE_DIR}/${b}" "${BIN}/"
  done
}

build_coredns() {
  [[ -x "${BIN}/coredns" ]] && return 0
  log "compiling coredns ${COREDNS_VERSION} (several minutes, first time only)"
  GOBIN="${STAGE_DIR}" gobuild install -trimpath -ldflags "-s -w" "github.com/coredns/coredns@${COREDNS_VERSION}" >&2
  mv -f "${STAGE_DIR}/coredns" "${BIN}/"
}

build_etcd() {
  [[ -x "${BIN}/etcd" && -x "${BIN}/etcdctl" ]] && return 0
  local dir="${BASE}/src/etcd"
  rm -rf "${dir}" && mkdir -p "${dir}"
  (
    cd "${dir}"
    go mod init dbops-testbed-etcd >/dev/null 2>&1
    go mod edit -go=1.26
    log "resolving etcd ${ETCD_VERSION}"
    # `go install pkg@version` refuses modules with replace directives, so build from a scratch module.
    go get -tool "go.etcd.io/etcd/server/v3@${ETCD_VERSION}" "go.etcd.io/etcd/etcdctl/v3@${ETCD_VERSION}" >&2
    log "compiling etcd, etcdctl"
    gobuild build -trimpath -ldflags "-s -w" -o "${STAGE_DIR}/etcd" go.etcd.io/etcd/server/v3 >&2
    gobuild build -trimpath -ldflags "-s -w" -o "${STAGE_DIR}/etcdctl" go.etcd.io/etcd/etcdctl/v3 >&2
  )
  mv -f "${STAGE_DIR}/etcd" "${STAGE_DIR}/etcdctl" "${BIN}/"
}

build_kwok() {
  [[ -x "${BIN}/kwok" ]] && return 0
  log "compiling kwok ${KWOK_VERSION}"
  GOBIN="${STAGE_DIR}" gobuild install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}" >&2
  mv -f "${STAGE_DIR}/kwok" "${BIN}/"
}

start=$(date +%s)
# Smallest first: a failure in the long kubernetes build then still leaves usable pieces cached.
build_kwok
build_etcd
build_k8s
build_coredns
all_present || { log "some binaries are still missing in ${BIN}"; exit 1; }
log "done in $(( $(date +%s) - start ))s"
printf '%s\n' "${BIN}"
