#!/usr/bin/env bash
# Install the Debian packages the tests need, if they are missing:
#   tools/test-bins/install-apt.sh PKG...
# (apt-get install --no-install-recommends; apt-get update first only if the install fails).
# Under CI=true a package that cannot be installed is an error (exit 1); elsewhere a warning
# (exit 0): the tests that need it skip with the reason.
set -euo pipefail

missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -gt 0 ] || exit 0

give_up() {
  if [ "${CI:-}" = "true" ]; then
    echo "install-apt.sh: CI=true and $*" >&2
    exit 1
  fi
  echo "install-apt.sh: $* (the tests that need ${missing[*]} will be skipped)" >&2
  exit 0
}

command -v apt-get >/dev/null || give_up "apt-get is not available to install ${missing[*]}"
SUDO=()
if [ "$(id -u)" != 0 ]; then
  if ! { command -v sudo >/dev/null && sudo -n true 2>/dev/null; }; then
    give_up "not root (and no sudo) to install ${missing[*]}"
  fi
  SUDO=(sudo -n)
fi
export DEBIAN_FRONTEND=noninteractive
install() { "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2; }
echo "install-apt.sh: installing ${missing[*]}" >&2
install || { "${SUDO[@]}" apt-get update -qq >&2 && install; } ||
  give_up "apt-get could not install ${missing[*]}"
