#!/usr/bin/env bash
# Build the real Kubernetes tools the realk8s tests need (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl, kwok and its stage files, helm, kustomize,
# kubeconform, argocd-cmp-server, actionlint) from the Go module proxy, at the versions pinned in
# versions.env. See docs/test-bins.md.
#
#   BIN=$(tools/test-bins/build.sh | tail -n 1)    # build what is missing, print the bin dir
#   tools/test-bins/build.sh --only etcd,kube-apiserver
#   tools/test-bins/build.sh --print-dir           # print the bin dir, build nothing
#
# stdout: one summary line per tool, a total line, then (last) the absolute bin directory.
# stderr: everything else (go's own output). On a failed build the directory line is not
# printed and the exit status is 1; bad usage exits 2.
#
# Binaries:  ${DYN_GITOPS_TEST_BINS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dyn-gitops/test-bins}/<key>/
#            where <key> is the first 12 hex digits of sha256(versions.env).
# Go caches: ${XDG_CACHE_HOME:-$HOME/.cache}/dyn-gitops/{go-mod,go-build}
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=common.sh
. "$HERE/common.sh"
VERSIONS_FILE=$HERE/versions.env
# kube-apiserver, kube-controller-manager, kube-scheduler and kubectl come from one wrapper
# module (built in this order, they share its module graph and so most GOCACHE entries).
TOOLS=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok helm kustomize
  kubeconform argocd-cmp-server actionlint)
K8S_CMDS=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
# The KWOK Stage files written next to the kwok binary (kwok-stages.yaml), as paths under
# the pinned module's kustomize/stage/: kwok itself embeds none (only kwokctl does).
KWOK_STAGES=(node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml
  pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml
  pod/chaos/pod-container-running-failed.yaml)
EXTRA_PINS=(argocd-gitops-engine argocd-build)   # optional entries in versions.env that are not tools

log() { printf '%s\n' "$*" >&2; }
die() { log "build.sh: $*"; exit 2; }

usage() {
  cat >&2 <<EOF
usage: $0 [--only NAME[,NAME...]] [--print-dir]
tools: ${TOOLS[*]}
EOF
  exit 2
}

# --- arguments ------------------------------------------------------------------------

only=""
print_dir=0
while [ $# -gt 0 ]; do
  case $1 in
    --only) [ $# -ge 2 ] || usage; only=$2; shift 2 ;;
    --only=*) only=${1#--only=}; shift ;;
    --print-dir) print_dir=1; shift ;;
    -h|--help) usage ;;
    *) log "unknown argument: $1"; usage ;;
  esac
done

is_tool() {
  local t
  for t in "${TOOLS[@]}"; do [ "$t" = "$1" ] && return 0; done
  return 1
}

selected=()
if [ -n "$only" ]; then
  IFS=, read -r -a selected <<<"$only"
  for t in "${selected[@]}"; do is_tool "$t" || die "--only: unknown tool '$t' (tools: ${TOOLS[*]})"; done
else
  selected=("${TOOLS[@]}")
fi

# --- versions and locations -----------------------------------------------------------

declare -A VERSION=()
while IFS= read -r line || [ -n "$line" ]; do
  line=${line%%#*}
  line=${line//[[:space:]]/}
  [ -n "$line" ] || continue
  [[ $line == *=* ]] || die "$VERSIONS_FILE: not NAME=version: $line"
  name=${line%%=*}
  is_tool "$name" || [[ " ${EXTRA_PINS[*]} " == *" $name "* ]] || die "$VERSIONS_FILE: unknown name '$name'"
  VERSION[$name]=${line#*=}
done <"$VERSIONS_FILE"
for t in "${TOOLS[@]}"; do
  [ -n "${VERSION[$t]:-}" ] || die "$VERSIONS_FILE: no version for $t"
done
for t in "${K8S_CMDS[@]}"; do
  [ "${VERSION[$t]}" = "${VERSION[kube-apiserver]}" ] ||
    die "$VERSIONS_FILE: $t must have kube-apiserver's version (one wrapper module builds them)"
done

BIN_DIR=$(bin_dir_of "" "$VERSIONS_FILE")

if [ "$print_dir" = 1 ]; then
  printf '%s\n' "$BIN_DIR"
  exit 0
fi

# --- Go environment -------------------------------------------------------------------

go_env build.sh

claim_bin_dir test-bins

# --- helpers --------------------------------------------------------------------------

# Path of the go.mod of MODULE@VERSION inside GOMODCACHE (downloads it if needed).
gomod_of() {
  (cd "$WORK" && go mod download -json "$1") |
    sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p'
}

# The replace directives of a go.mod file, one "OLD[@V] NEW[@V]" per line.
replaces_of() {
  awk '
    function emit(s,   f, n, a, i, old, new) {
      n = split(s, f, /[ \t]+/)
      a = 0
      for (i = 1; i <= n; i++) if (f[i] == "=>") a = i
      if (a == 0) return
      old = f[1]; if (a == 3) old = old "@" f[2]
      new = f[a + 1]; if (a + 2 <= n && f[a + 2] != "") new = new "@" f[a + 2]
      print old, new
    }
    { sub(/\/\/.*/, ""); sub(/^[ \t]+/, ""); sub(/[ \t]+$/, "") }
    $0 == "" { next }
    /^replace[ \t]*\($/ { block = 1; next }
    block && /^\)/ { block = 0; next }
    /^replace[ \t]/ { sub(/^replace[ \t]+/, ""); emit($0); next }
    block { emit($0) }
  ' "$1"
}

# A fresh wrapper module directory for one tool; prints its path.
new_wrapper() {
  local dir=$WORK/$1
  mkdir -p "$dir"
  (cd "$dir" && go mod init "dyn-gitops.local/test-bins/$1" 2>/dev/null)
  printf '%s\n' "$dir"
}

# --- one function per tool: build_<tool> VERSION OUTPUT ----------------------------------

build_etcd() {
  # server/go.mod replaces its sibling modules with ../ paths, so "go install" refuses it;
  # as a dependency those replaces are ignored and its requirements are real versions.
  local ver=$1 out=$2 dir
  dir=$(new_wrapper etcd)
  cd "$dir"
  GOFLAGS=$FLAGS_WRAPPER go get "go.etcd.io/etcd/server/v3@$ver"
  GOFLAGS=$FLAGS_WRAPPER go build -ldflags "-s -w" -o "$out" go.etcd.io/etcd/server/v3
}

# The wrapper module for k8s.io/kubernetes VERSION, made once per run; prints its path.
# k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them with
# ./staging/src/...; map each one to its published v0.X.Y instead.
k8s_wrapper() {
  local ver=$1 dir=$WORK/k8s gomod stg m c
  local -a edits=() pkgs=()
  if [ -f "$dir/.ready" ]; then
    printf '%s\n' "$dir"
    return 0
  fi
  stg=v0.${ver#v1.}
  gomod=$(gomod_of "k8s.io/kubernetes@$ver")
  [ -n "$gomod" ] || { log "cannot download k8s.io/kubernetes@$ver"; return 1; }
  while read -r m new; do
    case $new in ./staging/*) edits+=("-replace=$m=$m@$stg") ;; esac
  done < <(replaces_of "$gomod")
  [ ${#edits[@]} -gt 0 ] || { log "no staging replaces found in $gomod"; return 1; }
  log "k8s wrapper: ${#edits[@]} staging modules mapped to $stg"
  rm -rf "$dir"
  dir=$(new_wrapper k8s)
  for c in "${K8S_CMDS[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c@$ver"); done
  (
    cd "$dir"
    go mod edit "${edits[@]}"
    GOFLAGS=$FLAGS_WRAPPER go get "${pkgs[@]}" >&2
  ) || return 1
  touch "$dir/.ready"
  printf '%s\n' "$dir"
}

# One k8s.io/kubernetes command from the shared wrapper: build_k8s_cmd NAME VERSION OUTPUT.
build_k8s_cmd() {
  local cmd=$1 ver=$2 out=$3 dir minor ld p
  minor=$(cut -d. -f2 <<<"$ver")
  dir=$(k8s_wrapper "$ver")
  cd "$dir"
  ld="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $p.gitVersion=$ver -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  GOFLAGS=$FLAGS_WRAPPER go build -ldflags "$ld" -o "$out" "k8s.io/kubernetes/cmd/$cmd"
}

build_kube-apiserver() { build_k8s_cmd kube-apiserver "$@"; }
build_kube-controller-manager() { build_k8s_cmd kube-controller-manager "$@"; }
build_kube-scheduler() { build_k8s_cmd kube-scheduler "$@"; }
build_kubectl() { build_k8s_cmd kubectl "$@"; }

build_kwok() {
  # go.mod has no replace directives: a plain go install. Its Stage files (the fake node and
  # pod lifecycle; kwok refuses to start without any) are taken from the same module.
  local ver=$1 out=$2 moddir f stages
  (cd "$WORK" && GOBIN=$WORK/kwok-bin go install \
    -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$ver" "sigs.k8s.io/kwok/cmd/kwok@$ver")
  moddir=$(cd "$WORK" && go mod download -json "sigs.k8s.io/kwok@$ver" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
  [ -d "$moddir/kustomize/stage" ] || { log "no kustomize/stage in sigs.k8s.io/kwok@$ver"; return 1; }
  stages=$(dirname "$out")/kwok-stages.yaml
  {
    printf '# KWOK Stages from sigs.k8s.io/kwok@%s kustomize/stage/ (written by build.sh)\n' "$ver"
    for f in "${KWOK_STAGES[@]}"; do
      [ -f "$moddir/kustomize/stage/$f" ] || { log "kwok@$ver has no stage $f"; return 1; }
      printf -- '---\n# %s\n' "$f"
      cat "$moddir/kustomize/stage/$f"
    done
  } >"$stages.partial"
  mv -f "$stages.partial" "$stages"
  mv "$WORK/kwok-bin/kwok" "$out"
}

build_helm() {
  local ver=$1 out=$2 major
  major=$(cut -d. -f1 <<<"$ver")   # v4
  (cd "$WORK" && GOBIN=$WORK/helm-bin go install \
    -ldflags "-s -w -X helm.sh/helm/$major/internal/version.version=$ver -X helm.sh/helm/$major/internal/version.gitTreeState=clean" \
    "helm.sh/helm/$major/cmd/helm@$ver")
  mv "$WORK/helm-bin/helm" "$out"
}

build_kustomize() {
  local ver=$1 out=$2
  (cd "$WORK" && GOBIN=$WORK/kustomize-bin go install -ldflags "-s -w" \
    "sigs.k8s.io/kustomize/kustomize/v5@$ver")
  mv "$WORK/kustomize-bin/kustomize" "$out"
}

build_kubeconform() {
  local ver=$1 out=$2
  (cd "$WORK" && GOBIN=$WORK/kubeconform-bin go install -ldflags "-s -w -X main.version=$ver" \
    "github.com/yannh/kubeconform/cmd/kubeconform@$ver")
  mv "$WORK/kubeconform-bin/kubeconform" "$out"
}

build_argocd-cmp-server() {
  # Argo CD's full multi-call binary (github.com/argoproj/argo-cd/VER/cmd), built in a wrapper
  # module that copies Argo CD's replace block. It picks its component from $ARGOCD_BINARY_NAME
  # or the basename of argv[0]: installed as argocd-cmp-server it is the CMP server the tests
  # and the sidecar image run, and the same file (the "argocd" symlink next to it) is the
  # repo-server and application-controller of the Argo CD end-to-end tests. Argo's go.mod also
  # replaces its nested gitops-engine module with the local ./gitops-engine, which the argo-cd
  # module zip does not contain: that replace is pointed at the argocd-gitops-engine pin (a
  # pseudo-version at the Argo release commit), or dropped when there is no pin.
  local ver=$1 out=$2 mod dir gomod old new ge=${VERSION[argocd-gitops-engine]:-}
  local -a edits=()
  mod=github.com/argoproj/argo-cd/$(cut -d. -f1 <<<"$ver")
  gomod=$(gomod_of "$mod@$ver")
  [ -n "$gomod" ] || { log "cannot download $mod@$ver"; return 1; }
  while read -r old new; do
    case $new in
      ./*|../*)
        if [[ $old == */gitops-engine* && -n $ge ]]; then
          log "argocd: $old => ${old%@*}@$ge (instead of Argo's $new)"
          edits+=("-replace=$old=${old%@*}@$ge")
        else
          log "argocd: dropping Argo's local replace $old => $new"
        fi ;;
      *) edits+=("-replace=$old=$new") ;;
    esac
  done < <(replaces_of "$gomod")
  log "argocd: ${#edits[@]} replace directives derived from $mod@$ver"
  dir=$(new_wrapper argocd)
  cd "$dir"
  [ ${#edits[@]} -eq 0 ] || go mod edit "${edits[@]}"
  GOFLAGS=$FLAGS_WRAPPER go get "$mod@$ver"
  GOFLAGS=$FLAGS_WRAPPER go build -ldflags "-s -w -X $mod/common.version=${ver#v} \
    -X $mod/common.extraBuildInfo=dyn-gitops-test-bins" -o "$out" "$mod/cmd"
  ln -sfn argocd-cmp-server "$(dirname "$out")/argocd"
}

build_actionlint() {
  # the linter of .github/workflows (tests/test_release.py); a plain go install
  local ver=$1 out=$2
  (cd "$WORK" && GOBIN=$WORK/actionlint-bin go install -ldflags "-s -w -X github.com/rhysd/actionlint.version=$ver" \
    "github.com/rhysd/actionlint/cmd/actionlint@$ver")
  mv "$WORK/actionlint-bin/actionlint" "$out"
}

# A binary of TOOL at VERSION already built under another key (another versions.env that pins
# the same version: any edit of versions.env makes a new key): prints its path, or nothing.
# argocd-cmp-server also needs the same argocd-gitops-engine pin.
same_version_elsewhere() {
  local tool=$1 ver=$2 d
  for d in "$BIN_ROOT"/*/; do
    d=${d%/}
    [ "$d" != "$BIN_DIR" ] && [ -x "$d/$tool" ] && [ -f "$d/versions.env" ] || continue
    grep -qx -- "$tool=$ver" <(sed 's/#.*//; s/[[:space:]]//g' "$d/versions.env") || continue
    if [ "$tool" = argocd-cmp-server ]; then
      grep -qx -- "argocd-gitops-engine=${VERSION[argocd-gitops-engine]:-}" \
        <(sed 's/#.*//; s/[[:space:]]//g' "$d/versions.env") || continue
      grep -qx -- "argocd-build=${VERSION[argocd-build]:-}" \
        <(sed 's/#.*//; s/[[:space:]]//g' "$d/versions.env") || continue
    fi
    if [ "$tool" = kwok ]; then [ -f "$d/kwok-stages.yaml" ] || continue; fi
    printf '%s\n' "$d/$tool"
    return 0
  done
}

# How each binary reports its version; the output must contain the pinned version.
version_of() {
  case $1 in
    kube-apiserver|kube-controller-manager|kube-scheduler|etcd|kwok) "$2" --version ;;
    kubeconform) "$2" -v ;;
    kubectl) "$2" version --client ;;   # without --client it also asks a server, and fails
    actionlint) "$2" -version ;;
    argocd-cmp-server) ARGOCD_BINARY_NAME=argocd "$2" version --client ;;
    *) "$2" version ;;
  esac 2>&1
}

# Sets CPU to the CPU seconds (user + sys) used so far by finished child processes.
# `times` must run in this shell: in a pipe or $(...) a forked subshell would report 0.
child_cpu() {
  times >"$WORK/times"
  CPU=$(awk 'NR == 2 {
    t = 0
    for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] }
    printf "%d\n", t
  }' "$WORK/times")
}

# --- main -----------------------------------------------------------------------------

failed=()
total_start=$SECONDS
for tool in "${selected[@]}"; do
  ver=${VERSION[$tool]}
  bin=$BIN_DIR/$tool
  [ "$tool" != argocd-cmp-server ] || ln -sfn argocd-cmp-server "$BIN_DIR/argocd"
  if [ -x "$bin" ] && { [ "$tool" != kwok ] || [ -f "$BIN_DIR/kwok-stages.yaml" ]; }; then
    printf '%-23s %-8s cached %5ss  cpu %5ss  %s\n' "$tool" "$ver" 0 0 "$bin"
    continue
  fi
  other=$(same_version_elsewhere "$tool" "$ver")
  if [ -n "$other" ]; then
    # same tool, same version, another key: reuse it (a hard link when on one file system)
    cp -fl "$other" "$bin" 2>/dev/null || cp -f "$other" "$bin"
    [ "$tool" != kwok ] || cp -f "$(dirname "$other")/kwok-stages.yaml" "$BIN_DIR/kwok-stages.yaml"
    printf '%-23s %-8s reused %5ss  cpu %5ss  %s (from %s)\n' "$tool" "$ver" 0 0 "$bin" "$other"
    continue
  fi
  log "=== building $tool $ver"
  start=$SECONDS
  child_cpu
  cpu_start=$CPU
  partial=$BIN_DIR/.$tool.partial
  rm -f "$partial"
  set +e
  (
    set -euo pipefail
    "build_$tool" "$ver" "$partial"
    reported=$(version_of "$tool" "$partial")
    log "$tool reports: $(head -n 1 <<<"$reported")"
    grep -qF -- "${ver#v}" <<<"$reported" || { log "$tool does not report version $ver"; exit 1; }
  ) >&2
  rc=$?
  set -e
  took=$((SECONDS - start))
  child_cpu
  cpu=$((CPU - cpu_start))
  if [ $rc -eq 0 ]; then
    mv -f "$partial" "$bin"
    printf '%-23s %-8s built  %5ss  cpu %5ss  %s\n' "$tool" "$ver" "$took" "$cpu" "$bin"
  else
    rm -f "$partial"
    failed+=("$tool")
    printf '%-23s %-8s FAILED %5ss  cpu %5ss  (exit %s, see stderr)\n' "$tool" "$ver" "$took" "$cpu" "$rc"
  fi
done
child_cpu
printf '%-23s %-8s        %5ss  cpu %5ss\n' total "" "$((SECONDS - total_start))" "$CPU"

if [ ${#failed[@]} -gt 0 ]; then
  log "build.sh: FAILED: ${failed[*]}"
  exit 1
fi
printf '%s\n' "$BIN_DIR"
