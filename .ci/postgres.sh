#!/usr/bin/env bash
# A throwaway PostgreSQL server for the test suite.
#
#   source .ci/postgres.sh        # in a bash script: start it now, stop it when that shell exits
#   .ci/postgres.sh make test     # run one command with it, then stop it
#   .ci/postgres.sh               # start, print `SELECT version()`, stop (a smoke check)
#
# It finds initdb/pg_ctl/postgres under /usr/lib/postgresql/*/bin (newest version
# first) and, when there are none, installs Debian's `postgresql` package (root only;
# policy-rc.d keeps the package's own cluster from starting). As root the server runs
# as the `postgres` system user (created when missing). The cluster lives in a fresh
# mktemp -d directory: trust auth, 127.0.0.1 only, its unix socket inside that
# directory, fsync/full_page_writes/synchronous_commit off. It exports
#
#   LOOPCTL_MEMORY_TEST_POSTGRES_URL=postgresql+asyncpg://postgres@127.0.0.1:<port>/loopctl_memory_test
#
# and an EXIT trap stops the server and removes the directory whatever the exit status.
#
# Settings (environment):
#   PG_BIN_SEARCH   space-separated globs of bin directories (default /usr/lib/postgresql/*/bin)
#   PG_CI_PORT      first port to try (default 55432; the next free one up to +50 is used)
#   PG_CI_USER      OS user that runs the server when we are root (default postgres)
#   PG_CI_NO_INSTALL=1   fail instead of running apt-get when no binaries are found
#   PG_CI_LIB_ONLY=1     when sourced: only define the functions, start nothing (for testing)
# After start: PG_CI_BINDIR, PG_CI_DIR, PG_CI_PORT, PG_CI_VERSION are set.

PG_CI_DB_NAME="loopctl_memory_test"
PG_CI_DB_ROLE="postgres"
PG_CI_POLICY_RC_D="${PG_CI_POLICY_RC_D:-/usr/sbin/policy-rc.d}"

pg_ci_log() { echo "postgres.sh: $*" >&2; }

# Print the first directory matching $PG_BIN_SEARCH that has initdb, pg_ctl and
# postgres (highest version first); return 1 when there is none.
pg_ci_find_bindir() {
    local pattern dir
    local -a candidates=()
    for pattern in ${PG_BIN_SEARCH:-/usr/lib/postgresql/*/bin}; do
        for dir in $pattern; do  # unquoted on purpose: glob expansion
            [[ -d $dir ]] && candidates+=("$dir")
        done
    done
    ((${#candidates[@]})) || return 1
    while IFS= read -r dir; do
        if [[ -x $dir/initdb && -x $dir/pg_ctl && -x $dir/postgres ]]; then
            printf '%s\n' "$dir"
            return 0
        fi
    done < <(printf '%s\n' "${candidates[@]}" | sort -rV)
    return 1
}

# apt-get install postgresql, without letting the package start its own cluster.
pg_ci_install() {
    if [[ ${PG_CI_NO_INSTALL:-} == 1 ]]; then
        pg_ci_log "no PostgreSQL server binaries found (PG_BIN_SEARCH=${PG_BIN_SEARCH:-/usr/lib/postgresql/*/bin}) and PG_CI_NO_INSTALL=1"
        return 1
    fi
    if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null; then
        pg_ci_log "no PostgreSQL server binaries found and cannot install them (needs root and apt-get)"
        return 1
    fi
    pg_ci_log "no PostgreSQL server binaries found; installing Debian's postgresql package"
    local own_policy=""
    if [[ ! -e $PG_CI_POLICY_RC_D ]]; then
        # exit 101 = "action forbidden": invoke-rc.d / deb-systemd-invoke do not start services
        printf '#!/bin/sh\nexit 101\n' >"$PG_CI_POLICY_RC_D" && chmod 755 "$PG_CI_POLICY_RC_D" && own_policy=1
    fi
    local status=0
    {
        DEBIAN_FRONTEND=noninteractive apt-get update -q &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql
    } >&2 || status=$?
    [[ -n $own_policy ]] && rm -f "$PG_CI_POLICY_RC_D"
    ((status == 0)) || pg_ci_log "apt-get failed (exit $status)"
    return "$status"
}

# Run a command as the server's OS user (root cannot run the server).
pg_ci_as_user() {
    if [[ $(id -u) == 0 ]]; then
        runuser -u "$PG_CI_OS_USER" -- "$@"
    else
        "$@"
    fi
}

pg_ci_ensure_user() {
    if [[ $(id -u) != 0 ]]; then
        PG_CI_OS_USER=$(id -un)
        return 0
    fi
    PG_CI_OS_USER="${PG_CI_USER:-postgres}"
    if ! getent passwd "$PG_CI_OS_USER" >/dev/null; then
        pg_ci_log "creating system user $PG_CI_OS_USER"
        useradd --system --user-group --no-create-home --home-dir /nonexistent \
            --shell /usr/sbin/nologin "$PG_CI_OS_USER" || return 1
    fi
}

# Is something already listening on 127.0.0.1:$1?
pg_ci_port_busy() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

pg_ci_start() {
    PG_CI_BINDIR=$(pg_ci_find_bindir) || {
        pg_ci_install || return 1
        PG_CI_BINDIR=$(pg_ci_find_bindir) || {
            pg_ci_log "still no initdb/pg_ctl/postgres under ${PG_BIN_SEARCH:-/usr/lib/postgresql/*/bin} after installing"
            return 1
        }
    }
    pg_ci_ensure_user || return 1

    PG_CI_DIR=$(mktemp -d "${TMPDIR:-/tmp}/loopctl-pg.XXXXXX") || return 1
    mkdir "$PG_CI_DIR/data" "$PG_CI_DIR/socket" || return 1
    if [[ $(id -u) == 0 ]]; then
        chown -R "$PG_CI_OS_USER:" "$PG_CI_DIR" || return 1
    fi
    chmod 700 "$PG_CI_DIR/data"
    if ! pg_ci_as_user test -w "$PG_CI_DIR/data"; then
        pg_ci_log "$PG_CI_OS_USER cannot write to $PG_CI_DIR (is TMPDIR=${TMPDIR:-/tmp} reachable by that user?)"
        return 1
    fi

    # `cd` so that the server user never works from a directory it cannot read.
    if ! (cd "$PG_CI_DIR" && pg_ci_as_user "$PG_CI_BINDIR/initdb" -D "$PG_CI_DIR/data" \
        -U "$PG_CI_DB_ROLE" --auth=trust --encoding=UTF8 --locale=C --no-sync \
        >"$PG_CI_DIR/initdb.log" 2>&1); then
        pg_ci_log "initdb failed:"
        cat "$PG_CI_DIR/initdb.log" >&2
        return 1
    fi
    cat >>"$PG_CI_DIR/data/postgresql.conf" <<EOF || return 1

# --- throwaway CI cluster (.ci/postgres.sh) ---
listen_addresses = '127.0.0.1'
unix_socket_directories = '$PG_CI_DIR/socket'
max_connections = 200
fsync = off
synchronous_commit = off
full_page_writes = off
EOF

    local port=${PG_CI_PORT:-55432} last=$((${PG_CI_PORT:-55432} + 50)) started=""
    for (( ; port <= last; port++)); do
        pg_ci_port_busy "$port" && continue
        if (cd "$PG_CI_DIR" && pg_ci_as_user "$PG_CI_BINDIR/pg_ctl" start -w -t 60 \
            -D "$PG_CI_DIR/data" -l "$PG_CI_DIR/server.log" -o "-p $port" >"$PG_CI_DIR/pg_ctl.log" 2>&1); then
            started=1
            break
        fi
        # A port taken between the check and the bind: try the next; anything else: give up.
        grep -q "could not bind\|could not create any TCP/IP sockets" "$PG_CI_DIR/server.log" 2>/dev/null || break
    done
    if [[ -z $started ]]; then
        pg_ci_log "the server did not start (last port tried: $port); pg_ctl and server logs:"
        cat "$PG_CI_DIR/pg_ctl.log" "$PG_CI_DIR/server.log" >&2 2>/dev/null
        return 1
    fi
    PG_CI_PORT=$port

    local psql=("$PG_CI_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PG_CI_PORT" -U "$PG_CI_DB_ROLE")
    "${psql[@]}" -d postgres -c "CREATE DATABASE $PG_CI_DB_NAME" >&2 || return 1
    PG_CI_VERSION=$("${psql[@]}" -d "$PG_CI_DB_NAME" -At -c "SHOW server_version") || return 1

    export PG_CI_BINDIR PG_CI_DIR PG_CI_PORT PG_CI_VERSION
    export LOOPCTL_MEMORY_TEST_POSTGRES_URL="postgresql+asyncpg://$PG_CI_DB_ROLE@127.0.0.1:$PG_CI_PORT/$PG_CI_DB_NAME"
    echo "PostgreSQL $PG_CI_VERSION ($PG_CI_BINDIR, data in $PG_CI_DIR): LOOPCTL_MEMORY_TEST_POSTGRES_URL=$LOOPCTL_MEMORY_TEST_POSTGRES_URL"
}

# Stop the server and remove its directory. Never fails, safe to call twice.
pg_ci_stop() {
    local dir=${PG_CI_DIR:-}
    [[ -n $dir && -d $dir ]] || return 0
    if [[ -f $dir/data/postmaster.pid ]]; then
        (cd "$dir" && pg_ci_as_user "$PG_CI_BINDIR/pg_ctl" stop -D "$dir/data" -m fast -w -t 30 >/dev/null 2>&1) ||
            (cd "$dir" && pg_ci_as_user "$PG_CI_BINDIR/pg_ctl" stop -D "$dir/data" -m immediate -w -t 10 >/dev/null 2>&1) ||
            {
                local pid
                pid=$(head -n 1 "$dir/data/postmaster.pid" 2>/dev/null)
                [[ $pid =~ ^[0-9]+$ ]] && kill -KILL "$pid" 2>/dev/null
                sleep 1
            }
    fi
    rm -rf "$dir" || true
    PG_CI_DIR=""
    return 0
}

# Install pg_ci_stop as an EXIT trap, keeping any EXIT trap already set, and turn
# INT/TERM/HUP into an exit so that the EXIT trap runs for those too.
pg_ci_trap() {
    local previous=""
    if [[ -n $(trap -p EXIT) ]]; then
        eval "set -- $(trap -p EXIT)"
        previous=$3
    fi
    # shellcheck disable=SC2064  # expand $previous now
    trap "pg_ci_stop; ${previous:-:}" EXIT
    trap 'exit 129' HUP
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

if [[ ${BASH_SOURCE[0]} != "$0" ]]; then
    # Sourced.
    if [[ ${PG_CI_LIB_ONLY:-} != 1 ]]; then
        pg_ci_trap
        pg_ci_start || {
            pg_ci_log "could not start PostgreSQL"
            return 1 2>/dev/null || exit 1
        }
    fi
else
    # Run as a command.
    set -euo pipefail
    pg_ci_trap
    pg_ci_start
    if (($#)); then
        "$@"
    else
        "$PG_CI_BINDIR/psql" -X -h 127.0.0.1 -p "$PG_CI_PORT" -U "$PG_CI_DB_ROLE" -d "$PG_CI_DB_NAME" -At -c "SELECT version()"
    fi
fi
