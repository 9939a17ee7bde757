#!/usr/bin/env bash
# A throwaway PostgreSQL 15 with pgvector on 127.0.0.1, for the pgvector dense backend's tests (CI's and a
# developer's) and its benchmark.
#   bash .ci/postgres.sh install      pgvector for PostgreSQL 15 (as root): the Debian package where this release
#                                     has one, else built from Debian's own source package of it (Debian 12 ships
#                                     no pgvector; Debian 13's source builds against PostgreSQL 15's headers)
#   bash .ci/postgres.sh start DIR    initdb into DIR as the postgres user (the server refuses to run as root),
#                                     start it on a free port of 127.0.0.1, print its DSN on stdout
#   bash .ci/postgres.sh stop DIR     stop the server started in DIR (DIR is left for the caller to remove)
# Locally: dsn="$(bash .ci/postgres.sh start /tmp/pg)"; AUTORESEARCH_TEST_PGVECTOR_DSN="$dsn" python -m pytest ...
set -euo pipefail
PGBIN="${PGBIN:-/usr/lib/postgresql/15/bin}"
PGUSER_OS="${PGUSER_OS:-postgres}"            # the OS user the server runs as (the Debian package makes it)
PGVECTOR_SRC_SUITE="${PGVECTOR_SRC_SUITE:-trixie}"

as_server_user() {
    if [ "$(id -u)" = 0 ]; then runuser -u "$PGUSER_OS" -- "$@"; else "$@"; fi
}

install_pgvector() {
    local extdir; extdir="$("$PGBIN/pg_config" --sharedir)/extension"
    if [ -f "$extdir/vector.control" ]; then
        echo "postgres.sh: pgvector is installed ($extdir/vector.control)" >&2; return 0
    fi
    apt-get update -qq >/dev/null
    if apt-get install -y -qq postgresql-15-pgvector >/dev/null 2>&1; then
        echo "postgres.sh: installed postgresql-15-pgvector" >&2; return 0
    fi
    echo "postgres.sh: no postgresql-15-pgvector package here; building Debian $PGVECTOR_SRC_SUITE's source package" >&2
    local tmp; tmp="$(mktemp -d)"
    echo "deb-src http://deb.debian.org/debian $PGVECTOR_SRC_SUITE main" > "$tmp/src.list"
    local apt_src=(-o Dir::Etc::sourcelist="$tmp/src.list" -o Dir::Etc::sourceparts=- -o APT::Get::List-Cleanup=0)
    apt-get update -qq "${apt_src[@]}" >/dev/null
    apt-get install -y -qq "postgresql-server-dev-15" make gcc dpkg-dev >/dev/null
    (cd "$tmp" && apt-get source -qq --download-only "${apt_src[@]}" pgvector >/dev/null 2>&1 \
        && tar xzf pgvector_*.orig.tar.gz && cd pgvector-*/ \
        && make -s PG_CONFIG="$PGBIN/pg_config" OPTFLAGS="" >/dev/null \
        && make -s install PG_CONFIG="$PGBIN/pg_config" OPTFLAGS="" >/dev/null)
    rm -rf "$tmp"
    apt-get update -qq >/dev/null      # the machine's own package lists again, without the source suite
    test -f "$extdir/vector.control" || { echo "postgres.sh: pgvector did not install" >&2; return 1; }
    echo "postgres.sh: built and installed pgvector from source" >&2
}

start_server() {
    local dir="$1"
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    [ "$(id -u)" = 0 ] && chown "$PGUSER_OS" "$dir"
    as_server_user "$PGBIN/initdb" -D "$dir/data" -U postgres -A trust --no-sync -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log"
    local port; port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    # loopback only, the socket in DIR (not /var/run/postgresql, which may not exist or be another server's)
    as_server_user "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-h 127.0.0.1 -p $port -k $dir -c fsync=off -c maintenance_work_mem=1GB" start >/dev/null
    "$PGBIN/psql" -q -h 127.0.0.1 -p "$port" -U postgres -d postgres -c "CREATE EXTENSION IF NOT EXISTS vector" >/dev/null
    echo "$port" > "$dir/port"
    echo "postgresql://postgres@127.0.0.1:$port/postgres"
}

stop_server() {
    local dir; dir="$(cd "$1" && pwd)"
    as_server_user "$PGBIN/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
}

case "${1:-}" in
    install) install_pgvector ;;
    start) start_server "${2:?usage: postgres.sh start DIR}" ;;
    stop) stop_server "${2:?usage: postgres.sh stop DIR}" ;;
    *) echo "usage: bash .ci/postgres.sh install | start DIR | stop DIR" >&2; exit 2 ;;
esac
