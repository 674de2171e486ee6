#!/usr/bin/env bash
# Build the LeaderWorkerSet controller manager (sigs.k8s.io/lws, its cmd/ main package) from
# the Go module proxy, at the version pinned in lws-versions.env, for the realistic cluster's
# LeaderWorkerSet tests (tests/support/lws_controller.py). Writes lws-crds.yaml (the
# LeaderWorkerSet CRD) and lws-webhooks.yaml (its webhook configurations), both from the same
# module, next to the binary. See docs/test-bins.md
# ("LeaderWorkerSet").
#
#   BIN=$(tools/test-bins/build-lws.sh | tail -n 1)   # build what is missing, print the bin dir
#   tools/test-bins/build-lws.sh --print-dir          # print the bin dir, build nothing
#
# Same conventions as build.sh and build-flux.sh: stdout has one summary line per tool, a
# total line, then (last) the absolute bin directory; go's output goes to stderr; a failed
# build exits 1 without the directory line. Its own bin directory (keyed by
# sha256(lws-versions.env), prefixed lws-) so an LWS bump never rebuilds the Kubernetes
# binaries; the Go caches are build.sh's.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=common.sh
. "$HERE/common.sh"
VERSIONS_FILE=$HERE/lws-versions.env
TOOL=lws-controller-manager
MODULE=sigs.k8s.io/lws
CRDS_FILE=lws-crds.yaml
WEBHOOKS_FILE=lws-webhooks.yaml

log() { printf '%s\n' "$*" >&2; }
die() { log "build-lws.sh: $*"; exit 2; }

print_dir=0
while [ $# -gt 0 ]; do
  case $1 in
    --print-dir) print_dir=1; shift ;;
    *) die "usage: $0 [--print-dir]" ;;
  esac
done

ver=
while IFS= read -r line || [ -n "$line" ]; do
  line=${line%%#*}
  line=${line//[[:space:]]/}
  [ -n "$line" ] || continue
  [[ $line == *=* ]] || die "$VERSIONS_FILE: not NAME=version: $line"
  [ "${line%%=*}" = "$TOOL" ] || die "$VERSIONS_FILE: unknown name '${line%%=*}'"
  ver=${line#*=}
done <"$VERSIONS_FILE"
[ -n "$ver" ] || die "$VERSIONS_FILE: no version for $TOOL"

BIN_DIR=$(bin_dir_of "lws-" "$VERSIONS_FILE")

if [ "$print_dir" = 1 ]; then
  printf '%s\n' "$BIN_DIR"
  exit 0
fi

go_env build-lws.sh

claim_bin_dir lws-bins

# go.mod has no replace directives, but `go install MODULE/cmd@VERSION` asks the proxy for the
# module's version list (a deprecation check) and this proxy refuses it (403): a wrapper module
# requiring the pinned version, then go build of the main package (cmd/); the version variable
# as upstream's Makefile sets it.
build_tool() {
  local out=$1 dir=$WORK/lws
  mkdir -p "$dir"
  cd "$dir"
  go mod init dyn-gitops.local/test-bins/lws 2>/dev/null
  GOFLAGS="-mod=mod $GOFLAGS" go get "$MODULE@$ver"
  GOFLAGS="-mod=mod $GOFLAGS" go build -ldflags "-s -w -X $MODULE/pkg/version.GitVersion=$ver" \
    -o "$out" "$MODULE/cmd"
}

# The pinned version must be what the binary was built from: the build info names the main
# package's module ("<TAB>mod<TAB>sigs.k8s.io/lws<TAB>v0.7.0<TAB>h1:...").
check_version() {
  go version -m "$1" | grep -qP "^\s+mod\s+\Q$MODULE\E\s+\Q$ver\E(\s|\$)"
}

# The CRD (config/crd/bases) and the webhook configurations (config/webhook/manifests.yaml,
# before upstream's kustomize patches: the tests point them at the manager themselves) from
# the pinned module.
write_manifests() {
  local src f
  src=$(moddir_of "$MODULE@$ver")
  [ -n "$src" ] || { log "cannot download $MODULE@$ver"; return 1; }
  {
    printf '# LeaderWorkerSet CRD (written by build-lws.sh)\n'
    for f in "$src"/config/crd/bases/*.yaml; do
      printf -- '---\n# %s@%s %s\n' "$MODULE" "$ver" "${f#"$src"/}"
      cat "$f"
    done
  } >"$BIN_DIR/.$CRDS_FILE.partial"
  {
    printf '# LeaderWorkerSet webhooks (written by build-lws.sh)\n'
    printf '# %s@%s config/webhook/manifests.yaml\n' "$MODULE" "$ver"
    cat "$src/config/webhook/manifests.yaml"
  } >"$BIN_DIR/.$WEBHOOKS_FILE.partial"
  mv -f "$BIN_DIR/.$CRDS_FILE.partial" "$BIN_DIR/$CRDS_FILE"
  mv -f "$BIN_DIR/.$WEBHOOKS_FILE.partial" "$BIN_DIR/$WEBHOOKS_FILE"
}

child_cpu() {
  times >"$WORK/times"
  CPU=$(awk 'NR == 2 {
    t = 0
    for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] }
    printf "%d\n", t
  }' "$WORK/times")
}

failed=()
total_start=$SECONDS
bin=$BIN_DIR/$TOOL
if [ -x "$bin" ]; then
  printf '%-23s %-8s cached %5ss  cpu %5ss  %s\n' "$TOOL" "$ver" 0 0 "$bin"
else
  log "=== building $TOOL $ver"
  partial=$BIN_DIR/.$TOOL.partial
  rm -f "$partial"
  set +e
  (
    set -euo pipefail
    build_tool "$partial"
    check_version "$partial" || { log "$TOOL is not version $ver"; exit 1; }
  ) >&2
  rc=$?
  set -e
  took=$((SECONDS - total_start))
  child_cpu
  if [ $rc -eq 0 ]; then
    mv -f "$partial" "$bin"
    printf '%-23s %-8s built  %5ss  cpu %5ss  %s\n' "$TOOL" "$ver" "$took" "$CPU" "$bin"
  else
    rm -f "$partial"
    failed+=("$TOOL")
    printf '%-23s %-8s FAILED %5ss  cpu %5ss  (exit %s, see stderr)\n' "$TOOL" "$ver" "$took" "$CPU" "$rc"
  fi
fi
if [ ! -f "$BIN_DIR/$CRDS_FILE" ] || [ ! -f "$BIN_DIR/$WEBHOOKS_FILE" ]; then
  write_manifests || failed+=("$CRDS_FILE $WEBHOOKS_FILE")
fi
child_cpu
printf '%-23s %-8s        %5ss  cpu %5ss\n' total "" "$((SECONDS - total_start))" "$CPU"

if [ ${#failed[@]} -gt 0 ]; then
  log "build-lws.sh: FAILED: ${failed[*]}"
  exit 1
fi
printf '%s\n' "$BIN_DIR"
