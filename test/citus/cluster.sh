#!/usr/bin/env bash
# A Citus coordinator and two workers on loopback, for tests (test/citus/build.sh installs Citus).
#   test/citus/cluster.sh start | stop | status | createdb NAME | dropdb NAME
# CITUS_DIR (default /tmp/ticketd-citus) holds the data directories and logs; CITUS_PORT (default
# 9700) is the coordinator's port, the workers take the next two. Trust auth, loopback only, fsync
# off: nothing here is worth keeping. Every command may be run again; status exits non-zero while
# the coordinator is down.
set -euo pipefail

dir=${CITUS_DIR:-/tmp/ticketd-citus}
port=${CITUS_PORT:-9700}
ports=("$port" $((port + 1)) $((port + 2)))
bin=$(/usr/lib/postgresql/15/bin/pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)

# PostgreSQL refuses to run as root.
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
sql() { PGOPTIONS="-c client_min_messages=warning ${PGOPTIONS:-}" psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$1" -U postgres -d "$2" -At -c "$3"; }
running() { as_pg "$bin/pg_ctl" -D "$dir/$1" status >/dev/null 2>&1; }

# Citus keeps its node list per database: a database needs the extension on every node and the
# nodes registered on its coordinator.
setup_db() {
  for p in "${ports[@]}"; do sql "$p" "$1" 'CREATE EXTENSION IF NOT EXISTS citus'; done
  sql "$port" "$1" "SELECT citus_set_coordinator_host('127.0.0.1', $port)" >/dev/null
  for p in "${ports[@]:1}"; do sql "$port" "$1" "SELECT citus_add_node('127.0.0.1', $p)" >/dev/null; done
}

start() {
  mkdir -p "$dir"
  [ "$(id -u)" = 0 ] && chown postgres: "$dir"
  for p in "${ports[@]}"; do
    local d=$dir/$p
    if [ ! -f "$d/PG_VERSION" ]; then
      as_pg "$bin/initdb" -D "$d" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
      cat >>"$d/postgresql.conf" <<CONF
port = $p
listen_addresses = '127.0.0.1'
unix_socket_directories = ''
shared_preload_libraries = 'citus,pg_stat_statements'
# Statements per shard routing, for test/http/citus-routing.test.ts (citus_stat_statements).
citus.stat_statements_track = 'all'
max_connections = 300
# Citus runs a maintenance daemon per database; the suite clones one database per test file.
max_worker_processes = 64
fsync = off
synchronous_commit = off
full_page_writes = off
CONF
    fi
    running "$p" || as_pg "$bin/pg_ctl" -D "$d" -l "$dir/$p.log" -w start >/dev/null
  done
  setup_db postgres
  echo "postgres://postgres@127.0.0.1:$port/postgres"
}

stop() {
  for p in "${ports[@]}"; do
    if running "$p"; then as_pg "$bin/pg_ctl" -D "$dir/$p" -m fast -w stop >/dev/null; fi
  done
  echo "stopped"
}

status() {
  for p in "${ports[@]}"; do
    if running "$p"; then echo "127.0.0.1:$p running"; else echo "127.0.0.1:$p stopped"; fi
  done
  running "$port" && sql "$port" postgres \
    "SELECT 'node ' || nodename || ':' || nodeport || ' group ' || groupid || CASE WHEN isactive THEN ' active' ELSE ' inactive' END FROM pg_dist_node ORDER BY groupid"
}

# CREATE DATABASE on every node (Citus propagates it when asked), then the extension and nodes.
createdb() {
  local name=${1:?usage: cluster.sh createdb NAME}
  if [ -z "$(sql "$port" postgres "SELECT 1 FROM pg_database WHERE datname = '$name'")" ]; then
    PGOPTIONS='-c citus.enable_create_database_propagation=on' sql "$port" postgres "CREATE DATABASE \"$name\""
  fi
  setup_db "$name"
  echo "postgres://postgres@127.0.0.1:$port/$name"
}

# Citus's maintenance daemon stays connected to a database: drop it with FORCE.
dropdb() {
  local name=${1:?usage: cluster.sh dropdb NAME}
  PGOPTIONS='-c citus.enable_create_database_propagation=on' sql "$port" postgres "DROP DATABASE IF EXISTS \"$name\" WITH (FORCE)"
}

case ${1:-} in
  start | stop | status) "$1" ;;
  createdb | dropdb) "$1" "${2:-}" ;;
  *) echo "usage: $0 start|stop|status|createdb NAME|dropdb NAME" >&2; exit 2 ;;
esac
