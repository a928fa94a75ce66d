#!/usr/bin/env bash
# The smoke subset (vitest.smoke.config.ts) on other maintained Node lines, each installed as the project's own is
# (scripts/node-toolchain.sh). Each line gets a copy of the working tree in .toolchain/smoke-v<version>/ with its own
# node_modules, installed by that line's npm ci, so the main node_modules is never touched and an install on that
# line is checked too (an EBADENGINE warning fails it). A copy's node_modules is kept while the lockfile is unchanged.
#
#   scripts/node-smoke.sh 22 26
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || { echo "usage: scripts/node-smoke.sh MAJOR..." >&2; exit 2; }

for major in "$@"; do
  home=$(scripts/node-toolchain.sh install "$major")
  version=$("$home/bin/node" --version)
  dir=.toolchain/smoke-$version
  started=$(date +%s)

  # The working tree as git sees it (tracked and untracked files, without ignored ones), fresh each time.
  mkdir -p "$dir"
  find "$dir" -mindepth 1 -maxdepth 1 ! -name node_modules -exec rm -rf {} +
  git ls-files -z --cached --others --exclude-standard | tar --null -T - --ignore-failed-read -cf - | tar -xf - -C "$dir"

  (
    cd "$dir"
    export PATH="$home/bin:$PATH" npm_package_config_node_gyp_nodedir="$home"
    installed="$(sha256sum package-lock.json | cut -d' ' -f1) $version"
    if [ "$(cat node_modules/.agl-installed 2>/dev/null)" != "$installed" ]; then
      npm ci --no-audit --no-fund 2>&1 | tee npm-ci.log
      if grep -q EBADENGINE npm-ci.log; then echo "node-smoke.sh: npm ci on Node $version warns EBADENGINE" >&2; exit 1; fi
      echo "$installed" > node_modules/.agl-installed
    fi
    npx vitest run --config vitest.smoke.config.ts
  )
  echo "node-smoke.sh: the smoke subset passed on Node $version in $(($(date +%s) - started)) s"
done
