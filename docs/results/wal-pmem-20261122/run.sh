#!/usr/bin/env bash
# Commit latency at 1 client: nvm_wal = file vs pmem (tmpfs: page granularity) vs pmem with
# PMEM2_FORCE_GRANULARITY=CACHE_LINE. Engine base, data and WAL on the tmpfs
# /mnt/pgnvm/nvm, synchronous_commit = on, fsync = on; 3 rounds, the configurations
# interleaved in each round; 60 s of `pgbench -n -c 1 -T 60 -f insert.sql` per run.
#
#   PGNVM_HOME=/var/lib/pgnvm-wal ./pgnvm build --flavour release
#   flock /tmp/pgnvm-run.lock docs/results/wal-pmem-20261122/run.sh > raw.txt
#
# Runs as root (servers as the user pgnvm) or as the server user itself.
set -euo pipefail
BIN=${BIN:-/var/lib/pgnvm-wal/install/release/bin}
ROOT=${ROOT:-/mnt/pgnvm/nvm/walbench}
PORT=${PORT:-54392}
ROUNDS=${ROUNDS:-3}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-60}
D=$ROOT/data
as_pg() { if [[ $EUID -eq 0 ]]; then runuser -u pgnvm -- "$@"; else "$@"; fi; }

rm -rf "$ROOT"; mkdir -p "$ROOT"
[[ $EUID -eq 0 ]] && chown pgnvm "$ROOT"
as_pg "$BIN/initdb" -D "$D" -A trust -N --no-instructions >/dev/null
cat >>"$D/postgresql.conf" <<CONF
port = $PORT
unix_socket_directories = '$ROOT'
listen_addresses = ''
nvm_storage_engine = base
shared_buffers = 128MB
synchronous_commit = on
fsync = on
autovacuum = off
include_if_exists = 'walmode.conf'
CONF
cat >"$ROOT/insert.sql" <<'SQL'
\set id random(1, 1000000000)
INSERT INTO t (a, b) VALUES (:id, 'pgnvm');
SQL
chmod 644 "$ROOT/insert.sql"

start() {  # start <nvm_wal> [PMEM2_FORCE_GRANULARITY]
    echo "nvm_wal = $1" | as_pg tee "$D/walmode.conf" >/dev/null
    as_pg env ${2:+PMEM2_FORCE_GRANULARITY=$2} "$BIN/pg_ctl" -D "$D" -l "$ROOT/server.log" -w start >/dev/null
}
stop() { as_pg "$BIN/pg_ctl" -D "$D" -m fast -w stop >/dev/null; }
psql() { as_pg "$BIN/psql" -h "$ROOT" -p "$PORT" -X -qAt "$@" postgres; }

start file
psql -c "CREATE TABLE t (a int, b text)" -c "CREATE EXTENSION pgnvm"
stop

for round in $(seq 1 "$ROUNDS"); do
    for cfg in file pmem pmem-cl; do
        case $cfg in
            file) start file ;;
            pmem) start pmem ;;
            pmem-cl) start pmem CACHE_LINE ;;
        esac
        psql -c "TRUNCATE t" -c "CHECKPOINT"
        out=$(cd "$ROOT" && as_pg "$BIN/pgbench" -h "$ROOT" -p "$PORT" -n -c 1 -T "$SECONDS_PER_RUN" -f insert.sql postgres)
        tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' <<<"$out")
        lat=$(sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' <<<"$out")
        wal=$(psql -F ' ' -c "SELECT mode, coalesce(granularity, '-'), copies, persists, mappings, round(populate_ms::numeric, 1) FROM pgnvm_wal()")
        echo "round=$round cfg=$cfg tps=$tps latency_ms=$lat pgnvm_wal: $wal"
        stop
    done
done
grep "nvm_wal = pmem" "$ROOT/server.log" | sed 's/^[^]]*] //' | sort | uniq -c
rm -rf "$ROOT"
