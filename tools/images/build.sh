#!/usr/bin/env bash
# Build the two dyn-gitops images locally with podman, from a Python base assembled by
# mmdebstrap from the Debian packages of the configured mirror (no Docker Hub needed).
# The Dockerfile is the one the release workflow builds (public base pinned by digest);
# only the BASE_IMAGE build-arg differs. See docs/images.md.
#
#   tools/images/build.sh              # build what is missing; stdout: "cmp=<ref>" and "controller=<ref>"
#   tools/images/build.sh --print-key  # print the image content key, build nothing
#
# Caching (warm runs cost seconds):
#   base:   localhost/dyn-gitops-base:<base key>, key = sha256 of the base recipe below (suite,
#           mirror, package list); its rootfs tar is kept in $CACHE so an empty podman
#           storage re-imports it instead of running mmdebstrap again.
#   images: localhost/dyn-gitops{,-cmp}:<version>-<content key>, key = sha256 of the base key,
#           the Dockerfile, .dockerignore and every file the image copies; both are also
#           saved to $CACHE/images-<key>.tar, loaded when podman's storage is empty (a CI
#           machine whose ~/.cache is restored); the build stage is kept as
#           localhost/dyn-gitops-build:<version>-<key> (the layer cache of the next build).
# Cleaning: a checkout keeps only its newest key (the list in $CACHE/made-by-<checkout>.txt);
# the images and archive of its older keys are removed unless another checkout's list names
# them, and so are those of a checkout that no longer exists, and every untagged image the
# run left. Nothing else is touched.
# Env: DYN_GITOPS_IMAGES_CACHE (default ~/.cache/dyn-gitops/images), REVISION (OCI revision
# label; default: git HEAD), CONTAINERS_CONF (default: tools/images/containers.conf).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
CACHE=${DYN_GITOPS_IMAGES_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dyn-gitops/images}
export CONTAINERS_CONF=${CONTAINERS_CONF:-$HERE/containers.conf}

log() { printf 'images/build.sh: %s\n' "$*" >&2; }

# --- the base recipe (every input of the base is in this block: it is the base key) ------
SUITE=bookworm
mirror() {
  # the Debian mirror configured on the machine (deb822 or one-line sources) when the machine
  # runs Debian, else deb.debian.org (an Ubuntu mirror has no bookworm)
  local uri="" id=""
  # shellcheck disable=SC1091  # the machine's file
  id=$(. /etc/os-release 2>/dev/null && printf '%s' "${ID:-}")
  if [ "$id" = debian ]; then
    uri=$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null \
          | grep -v security | head -n 1 || true)
    [ -n "$uri" ] || uri=$(awk '$1=="deb" && $0 !~ /security/ {for (i=2;i<=NF;i++) if ($i ~ /^https?:/) {print $i; exit}}' \
          /etc/apt/sources.list 2>/dev/null || true)
  fi
  printf '%s\n' "${uri:-http://deb.debian.org/debian}"
}
MIRROR=$(mirror)
BASE_PACKAGES=python3,python3-venv,ca-certificates
BASE_RECIPE="suite=$SUITE mirror=$MIRROR variant=minbase include=$BASE_PACKAGES recipe=4"
# ---------------------------------------------------------------------------------------

key_of() { sha256sum | cut -c1-12; }
BASE_KEY=$(printf '%s\n' "$BASE_RECIPE" | key_of)
BASE_REF=localhost/dyn-gitops-base:$BASE_KEY
VERSION=$(sed -n 's/^__version__ = "\(.*\)"/\1/p' "$REPO/dyn_gitops/__init__.py")
[ -n "$VERSION" ] || { log "cannot read __version__ from dyn_gitops/__init__.py"; exit 1; }

# the files the Dockerfile copies (tracked or not ignored: the key must not see caches)
content_key() {
  (
    cd "$REPO"
    printf 'base=%s version=%s\n' "$BASE_KEY" "$VERSION"
    git ls-files -z --cached --others --exclude-standard -- tools/images/build.sh Dockerfile .dockerignore pyproject.toml README.md LICENSE plugin.yaml 'tools/images/requirements-*.txt' dyn_gitops operator/dyn_gitops_operator \
      | sort -z | xargs -0 sha256sum
  ) | key_of
}
KEY=$(content_key)
if [ "${1:-}" = "--print-key" ]; then printf '%s\n' "$KEY"; exit 0; fi

bash "$HERE/deps.sh" --check
mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9   # one build at a time (pytest-xdist workers, parallel runs)

ensure_base() {
  if ! podman image exists "$BASE_REF"; then
    tar="$CACHE/base-$BASE_KEY.tar"
    if [ ! -s "$tar" ]; then
      log "assembling the base with mmdebstrap ($BASE_RECIPE)"
      # shellcheck disable=SC2016  # "$1" is expanded by mmdebstrap's hook shell, not here
      mmdebstrap --variant=minbase --mode=root --include="$BASE_PACKAGES" \
        --aptopt='APT::Install-Recommends "false"' \
        --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
        --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
        --dpkgopt='path-exclude=/usr/share/info/*' \
        --customize-hook='rm -f "$1"/usr/lib/python3*/EXTERNALLY-MANAGED' \
        --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/var/log/*' \
        "$SUITE" "$tar.part.tar" "$MIRROR" >&2
      mv "$tar.part.tar" "$tar"
    fi
    podman import --change 'CMD ["/usr/bin/python3"]' "$tar" "$BASE_REF" >&2
  fi
}

t0=$(date +%s)
CMP_REF=localhost/dyn-gitops-cmp:$VERSION-$KEY
CTL_REF=localhost/dyn-gitops:$VERSION-$KEY
# the build stage, tagged: its layers (the hashed dependencies first) stay the cache of the
# next key's build, and nothing of it is left untagged
BUILD_REF=localhost/dyn-gitops-build:$VERSION-$KEY
archive="$CACHE/images-$KEY.tar"
# what this checkout made and keeps (refs, archive), one per line; another checkout's
# (a worktree, a CI workspace) has its own file and its images are never removed here
STATE="$CACHE/made-by-$(printf '%s\n' "$REPO" | key_of).txt"
dangling() { podman images --filter dangling=true --quiet --no-trunc | sort -u; }
before=$(dangling)
if ! { podman image exists "$CMP_REF" && podman image exists "$CTL_REF"; } && [ -s "$archive" ]; then
  log "loading both images from $archive"   # an empty podman storage with a warm cache
  podman load --quiet -i "$archive" >&2
fi
REVISION=${REVISION:-$(git -C "$REPO" rev-parse HEAD 2>/dev/null || echo unknown)}
built=0
for target in cmp controller build; do
  case $target in cmp) ref=$CMP_REF ;; controller) ref=$CTL_REF ;; build) ref=$BUILD_REF ;; esac
  podman image exists "$ref" && continue
  [ "$target" = build ] && [ "$built" = 0 ] && continue   # loaded from the archive: no cache needed
  [ "$built" = 1 ] || ensure_base
  log "building $ref (target $target)"
  # --network=host and the host's CA bundle: pip in the build stage reaches PyPI as the host does
  podman build --network=host -v /etc/ssl/certs:/etc/ssl/certs:ro --layers \
    --build-arg BASE_IMAGE="$BASE_REF" --build-arg VERSION="$VERSION" --build-arg REVISION="$REVISION" \
    --target "$target" -t "$ref" -f "$REPO/Dockerfile" "$REPO" >&2
  built=1
done
if [ "$built" = 1 ] || [ ! -s "$archive" ]; then
  podman save --quiet --multi-image-archive -o "$archive.part" "$CMP_REF" "$CTL_REF" >&2
  mv "$archive.part" "$archive"
fi
made=$(printf '%s\n' "$CMP_REF" "$CTL_REF" "$archive"; podman image exists "$BUILD_REF" && echo "$BUILD_REF")
old=$(grep -v '^#' "$STATE" 2>/dev/null || true)
# the first line names the checkout, so that a later build can tell when it is gone
{ printf '# checkout %s\n' "$REPO"; printf '%s\n' "$made"; } >"$STATE.part" && mv "$STATE.part" "$STATE"
# a list whose checkout is gone (a removed clone or worktree, or a list without the line, from
# an older build.sh) keeps nothing any more: what it made is removed like an older key's
for list in "$CACHE"/made-by-*.txt; do
  if [ ! -f "$list" ] || [ "$list" = "$STATE" ]; then continue; fi
  owner=$(sed -n '1s/^# checkout //p' "$list")
  [ -n "$owner" ] && [ -d "$owner" ] && continue
  old=$(printf '%s\n%s\n' "$old" "$(grep -v '^#' "$list" || true)")
  rm -f "$list"
done
# what this checkout made before and no checkout keeps now: its older keys' images and archive
kept=$({ grep -hv '^#' "$CACHE"/made-by-*.txt 2>/dev/null || true; } | sort -u)
for item in $(comm -23 <(printf '%s\n' "$old" | sort -u) <(printf '%s\n' "$kept")); do
  case $item in
    /*) rm -f "$item" ;;
    *) podman rmi "$item" >/dev/null 2>&1 || true ;;   # not --force: never a running container's image
  esac
done
# the untagged images this run left (the venv stages, the older keys' layers): removed until
# none is left; the ones that were there before it are not ours
for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
  left=$(comm -13 <(printf '%s\n' "$before") <(dangling))
  [ -n "$left" ] || break
  # shellcheck disable=SC2086  # one image id per word
  podman rmi $left >/dev/null 2>&1 || true
  [ "$left" != "$(comm -13 <(printf '%s\n' "$before") <(dangling))" ] || break   # in use: stop
done
t2=$(date +%s)
log "images ready in $((t2 - t0))s (built: $built)"
printf 'cmp=%s\ncontroller=%s\nbase=%s\n' "$CMP_REF" "$CTL_REF" "$BASE_REF"
