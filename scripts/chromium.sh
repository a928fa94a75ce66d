#!/usr/bin/env bash
# Debian's Chromium for the browser tests and the UI bench, driven by playwright-core (which never downloads a
# browser). Idempotent: installs the package (apt-get update first) only when no chromium binary is found; prints the
# path of the executable on stdout.
#
#   scripts/chromium.sh            install when missing, print the path
#   scripts/chromium.sh path       print the path, or fail when missing
#
# AGL_CHROMIUM names another executable (a Chromium or Chrome the machine already has).
set -euo pipefail

log() { echo "chromium.sh: $*" >&2; }
die() { log "$*"; exit 1; }

find_chromium() {
  local candidate
  for candidate in "${AGL_CHROMIUM:-}" /usr/bin/chromium /usr/bin/chromium-browser; do
    if [[ -n $candidate && -x $candidate ]]; then
      echo "$candidate"
      return 0
    fi
  done
  return 1
}

install_chromium() {
  [[ $(id -u) -eq 0 ]] || die "Chromium is not installed and this is not root: run 'apt-get install -y chromium' as root"
  log "installing Debian's chromium (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >&2
}

case "${1:-install}" in
  install)
    find_chromium || { install_chromium && find_chromium; } || die "chromium is still missing after apt-get install"
    ;;
  path)
    find_chromium || die "chromium is not installed: run scripts/chromium.sh"
    ;;
  *)
    die "usage: scripts/chromium.sh [install|path]"
    ;;
esac
