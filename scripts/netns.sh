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
# Several hosts on one network (the multi-host tests): a switch is a namespace holding a bridge; each host joins it.
#
#   scripts/netns.sh switch SW                     namespace SW with a bridge br0
#   scripts/netns.sh join SW NS IF ADDR            host NS (created when missing; "-" is this host) gets interface IF
#                                                  with ADDR (a.b.c.d/24) on SW's bridge; cut/restore NS IF as above
#   scripts/netns.sh pair NS1 IF1 ADDR1 NS2 IF2 ADDR2   a direct link between two hosts (a.b.c.d/30 each)
#   scripts/netns.sh remove NS...                  removes namespaces (and with them their links; never fails)
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

switch() {
  ip netns add "$1"
  ip -n "$1" link add br0 type bridge
  ip -n "$1" link set br0 up
  ip -n "$1" link set lo up
}

# Puts interface $2 (in this namespace) into host $1, unless $1 is "-".
into() {
  [[ $1 == - ]] || ip link set "$2" netns "$1"
}
on() {
  if [[ $1 == - ]]; then shift; ip "$@"; else local ns=$1; shift; ip -n "$ns" "$@"; fi
}

join() {
  local sw=$1 ns=$2 if=$3 addr=$4
  [[ $ns == - ]] || ip netns list | grep -qw "$ns" || { ip netns add "$ns"; ip -n "$ns" link set lo up; }
  ip link add "$if" type veth peer name "${if}s"
  ip link set "${if}s" netns "$sw"
  ip -n "$sw" link set "${if}s" master br0 up
  into "$ns" "$if"
  on "$ns" addr add "$addr" dev "$if"
  on "$ns" link set "$if" up
}

pair() {
  ip link add "$2" type veth peer name "$5"
  into "$1" "$2"
  into "$4" "$5"
  on "$1" addr add "$3" dev "$2"
  on "$4" addr add "$6" dev "$5"
  on "$1" link set "$2" up
  on "$4" link set "$5" up
}

command=${1:-}
case $command in
  tools) tools ;;
  create) [[ $# -eq 5 ]] || die "usage: $0 create NS HOSTIF NSIF CIDR"; create "$2" "$3" "$4" "$5" ;;
  cut) [[ $# -eq 3 ]] || die "usage: $0 cut NS NSIF"; on "$2" link set "$3" down ;;
  restore) [[ $# -eq 3 ]] || die "usage: $0 restore NS NSIF"; on "$2" link set "$3" up ;;
  delete) [[ $# -eq 3 ]] || die "usage: $0 delete NS HOSTIF"; delete "$2" "$3" ;;
  switch) [[ $# -eq 2 ]] || die "usage: $0 switch SW"; switch "$2" ;;
  join) [[ $# -eq 5 ]] || die "usage: $0 join SW NS IF ADDR"; join "$2" "$3" "$4" "$5" ;;
  pair) [[ $# -eq 7 ]] || die "usage: $0 pair NS1 IF1 ADDR1 NS2 IF2 ADDR2"; pair "$2" "$3" "$4" "$5" "$6" "$7" ;;
  remove) shift; for ns in "$@"; do ip netns del "$ns" 2>/dev/null || true; done ;;
  *) die "usage: $0 tools|create|cut|restore|delete|switch|join|pair|remove ..." ;;
esac
