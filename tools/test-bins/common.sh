# Sourced by build.sh, build-flux.sh and build-lws.sh: where their binaries live and the Go
# environment they all build with (one place; the Go caches are shared by the three).

CACHE_HOME=${XDG_CACHE_HOME:-$HOME/.cache}
BIN_ROOT=${DYN_GITOPS_TEST_BINS_CACHE:-$CACHE_HOME/dyn-gitops/test-bins}
FLAGS_INSTALL="-trimpath -buildvcs=false"
FLAGS_WRAPPER="-mod=mod $FLAGS_INSTALL"

# bin_dir_of PREFIX VERSIONS_FILE: the bin directory keyed by the first 12 hex digits of
# sha256(VERSIONS_FILE), so any edit of the pins means a fresh directory.
bin_dir_of() {
  local key
  key=$(sha256sum "$2" | cut -c1-12)
  realpath -m "$BIN_ROOT/$1$key"
}

# go_env SCRIPT: exit 1 (naming SCRIPT) without Go; else the shared build environment.
go_env() {
  command -v go >/dev/null || { printf '%s\n' "$1: go is not on PATH" >&2; exit 1; }
  export GOMODCACHE=$CACHE_HOME/dyn-gitops/go-mod
  export GOCACHE=$CACHE_HOME/dyn-gitops/go-build
  export GOTOOLCHAIN=auto   # several go.mod files ask for a newer Go than the installed one
  export CGO_ENABLED=0      # static binaries
  export GOWORK=off
  unset GOBIN GOOS GOARCH
  export GOFLAGS=$FLAGS_INSTALL
}

# claim_bin_dir NAME: create BIN_DIR (with a copy of VERSIONS_FILE), hold its lock for the rest
# of the run (two concurrent runs would otherwise build the same tool twice) and make WORK, a
# scratch directory removed on exit (module caches leave read-only files: made writable first).
claim_bin_dir() {
  mkdir -p "$BIN_DIR" "$GOMODCACHE" "$GOCACHE"
  cp "$VERSIONS_FILE" "$BIN_DIR/$(basename "$VERSIONS_FILE")"
  exec 9>"$BIN_DIR/.lock"
  flock 9
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/dyn-gitops-$1.XXXXXX")
  trap 'chmod -R u+w "$WORK" 2>/dev/null; rm -rf "$WORK"' EXIT
}

# moddir_of MODULE@VERSION: its directory in GOMODCACHE (downloaded if needed).
moddir_of() {
  (cd "$WORK" && go mod download -json "$1") |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p'
}
