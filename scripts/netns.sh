#!/usr/bin/env bash
# Network namespaces for the fault tests: a namespace joined to this host by a veth pair, whose link the tests cut and
# restore. Needs root and iproute2 (`ip`); installs Debian's iproute2 when it is missing (apt-get, as root).
#
#   scripts/netns.sh tools                         make sure `ip` and `ss` are there; prints the path of `ip`
#   scripts/netns.sh create NS HOSTIF NSIF CIDR    namespace NS, veth HOSTIF (here, CIDR's .1) <-> NSIF (in NS, .2)
#   scripts/netns.sh cut NS NSIF                   takes the link down (the namespace side: nothing leaks elsewhere)
#   scripts/netns.sh restore NS NSIF               brings it up again
#   scripts/netns.sh delete NS HOSTIF              removes both (idempotent; never fails)
#
# CIDR is a /30 like 10.201.7.0/30: the host side gets .1, the namespace side .2.
set -euo pipefail

log() { echo "netns.sh: $*" >&2; }
die() { log "$*"; exit 1; }

tools() {
  if ! command -v ip >/dev/null || ! command -v ss >/dev/null; then
    [[ $(id -u) -eq 0 ]] || die "iproute2 (ip, ss) is not installed and this is not root: run 'apt-get install -y iproute2' as root"
    log "installing Debian's iproute2 (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq iproute2 >&2
  fi
  [[ $(id -u) -eq 0 ]] || die "network namespaces need root"
  command -v ip
}

# The n-th address of a /30 written as a.b.c.d/30 (d a multiple of 4).
addr() {
  local base=${1%/*}
  echo "${base%.*}.$(( ${base##*.} + $2 ))"
}

create() {
  local ns=$1 hostif=$2 nsif=$3 cidr=$4
  ip netns add "$ns"
  ip link add "$hostif" type veth peer name "$nsif"
  ip link set "$nsif" netns "$ns"
  ip addr add "$(addr "$cidr" 1)/30" dev "$hostif"
  ip link set "$hostif" up
  ip -n "$ns" addr add "$(addr "$cidr" 2)/30" dev "$nsif"
  ip -n "$ns" link set lo up
  ip -n "$ns" link set "$nsif" up
}

delete() {
  local ns=$1 hostif=$2
  ip link del "$hostif" 2>/dev/null || true
  ip netns del "$ns" 2>/dev/null || true
}

command=${1:-}
case $command in
  tools) tools ;;
  create) [[ $# -eq 5 ]] || die "usage: $0 create NS HOSTIF NSIF CIDR"; create "$2" "$3" "$4" "$5" ;;
  cut) [[ $# -eq 3 ]] || die "usage: $0 cut NS NSIF"; ip -n "$2" link set "$3" down ;;
  restore) [[ $# -eq 3 ]] || die "usage: $0 restore NS NSIF"; ip -n "$2" link set "$3" up ;;
  delete) [[ $# -eq 3 ]] || die "usage: $0 delete NS HOSTIF"; delete "$2" "$3" ;;
  *) die "usage: $0 tools|create|cut|restore|delete ..." ;;
esac
