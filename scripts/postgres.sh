#!/usr/bin/env bash
# A private PostgreSQL server for tests and benchmarks: Debian's package, one cluster under $AGL_POSTGRES_DIR
# (default /tmp/agl-postgres), listening on 127.0.0.1 only, with trust authentication and without fsync (test data is
# disposable; a commit is still written to the kernel before it is acknowledged).
#
#   scripts/postgres.sh start    install the server when missing, create the cluster once, start it; prints the URL
#   scripts/postgres.sh stop     stop it (unless another live lease holds it, see below); `stop --force` always stops
#   scripts/postgres.sh url      print the URL of the running server
#   scripts/postgres.sh status   exit 0 when running
#
# Leases: several test runs (other checkouts, other shells) may share the server. With AGL_POSTGRES_LEASE=<pid>,
# `start` records a lease for that process and `stop` drops it, stopping the server only when no live process holds
# a lease any more. Without AGL_POSTGRES_LEASE, `stop` stops the server unless a live lease holds it.
#
# Idempotent and quick once installed: `start` on a running server only prints the URL.
set -euo pipefail

DIR=${AGL_POSTGRES_DIR:-/tmp/agl-postgres}
DATA=$DIR/data
SOCKET_DIR=$DIR/socket
LEASES=$DIR/leases
DATABASE=agl
PG_USER=postgres

log() { echo "postgres.sh: $*" >&2; }
die() { log "$*"; exit 1; }

# The newest installed server binaries (Debian keeps them in /usr/lib/postgresql/<major>/bin).
find_bin() {
  local dir
  for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5 -V -r); do
    if [[ -x $dir/postgres && -x $dir/initdb && -x $dir/pg_ctl ]]; then
      echo "$dir"
      return 0
    fi
  done
  return 1
}

install_server() {
  [[ $(id -u) -eq 0 ]] || die "PostgreSQL server not installed and not root: run 'apt-get install -y postgresql' as root"
  log "installing Debian's PostgreSQL server (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq postgresql >&2
}

# Runs a command as the cluster owner: initdb and postgres refuse to run as root.
as_owner() {
  if [[ $(id -u) -eq 0 ]]; then
    runuser -u "$PG_USER" -- "$@"
  else
    "$@"
  fi
}

free_port() {
  node -e 'const s = require("net").createServer(); s.listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); });'
}

port_in_use() {
  node -e 'const s = require("net").createServer(); s.once("error", () => process.exit(0)); s.listen(Number(process.argv[1]), "127.0.0.1", () => s.close(() => process.exit(1)));' "$1"
}

is_running() {
  [[ -f $DATA/PG_VERSION ]] && as_owner "$BIN/pg_ctl" status -D "$DATA" >/dev/null 2>&1
}

url() {
  echo "postgres://$PG_USER@127.0.0.1:$(cat "$DIR/port")/$DATABASE"
}

live_leases() {
  local lease pid
  mkdir -p "$LEASES"
  for lease in "$LEASES"/*; do
    [[ -e $lease ]] || continue
    pid=$(basename "$lease")
    if kill -0 "$pid" 2>/dev/null; then echo "$pid"; else rm -f "$lease"; fi
  done
}

prepare_dir() {
  mkdir -p "$DIR" "$SOCKET_DIR" "$LEASES"
  chmod 0755 "$DIR"
  chmod 0777 "$LEASES"
  if [[ $(id -u) -eq 0 ]]; then
    id -u "$PG_USER" >/dev/null 2>&1 || die "user $PG_USER missing (it comes with Debian's postgresql package)"
    chown "$PG_USER" "$DIR" "$SOCKET_DIR"
  fi
}

start() {
  prepare_dir
  if ! is_running; then
    if [[ ! -f $DATA/PG_VERSION ]]; then
      log "creating a cluster in $DATA"
      rm -rf "$DATA"
      as_owner "$BIN/initdb" -D "$DATA" -U "$PG_USER" --auth=trust --encoding=UTF8 --no-locale >/dev/null
    fi
    local port
    port=$(cat "$DIR/port" 2>/dev/null || true)
    if [[ -z $port ]] || port_in_use "$port"; then port=$(free_port); fi
    echo "$port" >"$DIR/port"
    # A stale pid file from a killed server would stop pg_ctl from starting a new one.
    rm -f "$DATA/postmaster.pid"
    as_owner "$BIN/pg_ctl" start 9>&- -D "$DATA" -w -t 60 -l "$DIR/server.log" -o "-p $port -k $SOCKET_DIR \
      -c listen_addresses=127.0.0.1 -c max_connections=300 -c shared_buffers=128MB -c fsync=off \
      -c full_page_writes=off -c log_min_messages=warning -c log_min_error_statement=panic" >/dev/null ||
      { tail -n 20 "$DIR/server.log" >&2; die "the server did not start (log: $DIR/server.log)"; }
    log "server started on 127.0.0.1:$port (data: $DATA)"
  fi
  local psql=("$BIN/psql" -X -q -h 127.0.0.1 -p "$(cat "$DIR/port")" -U "$PG_USER")
  if [[ $("${psql[@]}" -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$DATABASE'") != 1 ]]; then
    "${psql[@]}" -d postgres -c "CREATE DATABASE $DATABASE" >/dev/null 2>&1 ||
      [[ $("${psql[@]}" -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$DATABASE'") == 1 ]] ||
      die "cannot create database $DATABASE"
  fi
  if [[ -n ${AGL_POSTGRES_LEASE:-} ]]; then touch "$LEASES/$AGL_POSTGRES_LEASE"; fi
  url
}

stop() {
  [[ -n ${AGL_POSTGRES_LEASE:-} ]] && rm -f "$LEASES/$AGL_POSTGRES_LEASE"
  if [[ ${1:-} != --force ]]; then
    local holders
    holders=$(live_leases | tr '\n' ' ')
    if [[ -n $holders ]]; then
      log "left running: still leased by process(es) $holders"
      return 0
    fi
  fi
  if is_running; then
    as_owner "$BIN/pg_ctl" stop -D "$DATA" -m fast -w -t 60 >/dev/null
    log "server stopped"
  fi
}

command=${1:-}
case $command in
  start | stop | url | status) ;;
  *) die "usage: $0 start|stop [--force]|url|status" ;;
esac

BIN=$(find_bin) || { install_server; BIN=$(find_bin) || die "no PostgreSQL server binaries after installing"; }

# One start or stop at a time (concurrent test runs share the cluster).
mkdir -p "$DIR"
exec 9>"$DIR/lock"
flock 9

case $command in
  start) start ;;
  stop) stop "${2:-}" ;;
  url) is_running || die "not running (scripts/postgres.sh start)"; url ;;
  status) is_running ;;
esac
