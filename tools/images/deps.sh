#!/usr/bin/env bash
# Install the Debian packages the image tests, the Argo CD end-to-end tests and the release
# rehearsal need (podman, buildah, skopeo, mmdebstrap, docker-registry, runc, redis-server, git),
# if they are missing. Called by scripts/test.
#
#   tools/images/deps.sh            # install what is missing (needs root and apt-get)
#   tools/images/deps.sh --check    # exit 0 if everything is there, 1 otherwise; installs nothing
#
# Not root, or no apt-get: prints what is missing and exits 1 (scripts/test then fails under
# CI=true and lets the tests skip otherwise). See docs/images.md.
set -euo pipefail

# debian-archive-keyring: mmdebstrap verifies bookworm with it (already there on Debian, not on Ubuntu)
# (shellcheck: actionlint runs it on the workflow's scripts, the suite on ours)
PACKAGES=(podman buildah skopeo mmdebstrap docker-registry runc uidmap ca-certificates debian-archive-keyring
  shellcheck redis-server git)
# command each package provides (what the tests call); redis-server and git: Argo CD's cache and
# the loopback Git server of tests/test_argocd_e2e.py
COMMANDS=(podman buildah skopeo mmdebstrap docker-registry runc shellcheck redis-server git)

missing_cmds() {
  local c
  for c in "${COMMANDS[@]}"; do
    command -v "$c" >/dev/null 2>&1 || [ -x "/usr/bin/$c" ] || printf '%s\n' "$c"
  done
  [ -f /usr/share/keyrings/debian-archive-keyring.gpg ] || printf '%s\n' debian-archive-keyring
}

missing=$(missing_cmds)
[ -z "$missing" ] && exit 0
if [ "${1:-}" = "--check" ]; then
  printf 'tools/images/deps.sh: missing: %s\n' "${missing//$'\n'/ }" >&2
  exit 1
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  printf 'tools/images/deps.sh: missing %s; install the Debian packages %s (needs root and apt-get)\n' \
    "${missing//$'\n'/ }" "${PACKAGES[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
start=$(date +%s)
# apt-get update only when the lists are older than a day or absent (a fresh CI machine)
if [ -z "$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -mmin -1440 2>/dev/null | head -n 1)" ]; then
  apt-get update -qq >&2
fi
apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >&2
printf 'tools/images/deps.sh: installed %s in %ss\n' "${PACKAGES[*]}" "$(( $(date +%s) - start ))" >&2
missing=$(missing_cmds)
[ -z "$missing" ] || { printf 'tools/images/deps.sh: still missing after apt-get: %s\n' "${missing//$'\n'/ }" >&2; exit 1; }
