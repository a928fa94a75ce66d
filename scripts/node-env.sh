# Sourced by scripts that run node themselves (python-bridge/scripts/*.sh): puts the Node that make uses first on
# PATH, so that they run on it outside make too. Under make it is first already, and this changes nothing.
agl_node_home=$("$(dirname "${BASH_SOURCE[0]}")/node-toolchain.sh" home)
if [ -n "$agl_node_home" ]; then
  if [ ! -x "$agl_node_home/bin/node" ]; then
    echo "$(basename "$0"): the machine's Node ($(node --version 2>/dev/null || echo none)) is not a maintained line" \
      "and the project's pinned Node is not installed yet: run 'make deps' first" >&2
    exit 1
  fi
  PATH="$agl_node_home/bin:$PATH"
fi
unset agl_node_home
