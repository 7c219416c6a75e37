#!/bin/sh
# pg-smoke.sh - one simulated power cut of a PostgreSQL server under pgbench.
#
#   pg-smoke.sh BINDIR WORKDIR [SECONDS [SCALE [CLIENTS [MATERIALIZE-OPTS...]]]]
#
# initdb (outside the preload: the stopped cluster is the baseline),
# powerloss init, start with LD_PRELOAD, pgbench -i, CHECKPOINT, SECONDS of pgbench,
# freeze the server (powerloss freeze: no persist after the cut, every process
# stopped), build
# the directory the cut leaves (powerloss materialize), SIGKILL the server,
# start a second server (no preload) on the materialized directory and check:
# recovery completed, pgbench_accounts has SCALE*100000 rows, and TPC-B's
# balances agree (sum of account, teller, branch balances = sum of history
# deltas).  PL_SMOKE_CUT=K: the cut at the K-th persist after pgbench starts
# (powerloss cut), not at a random time.  PL_SMOKE_PRELOAD=0: the same pgbench run without the library
# and no cut (the tps of reference).  Server settings can be added with PL_SMOKE_CONF (lines for
# postgresql.conf) and PL_SMOKE_ENV (extra environment for the server, e.g.
# PMEM2_FORCE_GRANULARITY=CACHE_LINE), initdb options with PL_SMOKE_INITDB_OPTS
# (e.g. -c nvm_storage_engine=se2); POWERLOSS_BREAK is passed to the
# server.  Run as root, it runs the servers as the user pgnvm (PostgreSQL
# refuses root), as the harness does.  Prints "smoke: ok" or "smoke: FAIL".
set -u
BIN=$1
W=$2
SECS=${3:-5}
SCALE=${4:-5}
CLIENTS=${5:-2}
shift $(($# < 5 ? $# : 5))
HERE=$(cd "$(dirname "$0")/.." && pwd)
LIB=$HERE/build/libpowerloss.so
TOOL=$HERE/build/powerloss
PORT=${PL_SMOKE_PORT:-54987}

if [ "$(id -u)" = 0 ]; then AS="runuser -u pgnvm --"; else AS=""; fi

rm -rf "$W"
mkdir -p "$W"
[ -n "$AS" ] && chown pgnvm: "$W"
run() { $AS env "$@"; }

# shellcheck disable=SC2086
run "$BIN/initdb" -N -A trust -U postgres ${PL_SMOKE_INITDB_OPTS:-} -D "$W/data" >"$W/initdb.log" 2>&1 || { echo "smoke: initdb failed"; exit 1; }
cat >>"$W/data/postgresql.conf" <<EOF
port = $PORT
listen_addresses = ''
unix_socket_directories = '$W'
${PL_SMOKE_CONF:-}
EOF
if [ "${PL_SMOKE_PRELOAD:-1}" = 0 ]; then
	# the overhead's reference: the same run without the library, no cut
	# shellcheck disable=SC2086
	run ${PL_SMOKE_ENV:-} "$BIN/pg_ctl" -D "$W/data" -l "$W/server.log" -w start >/dev/null || exit 1
	run "$BIN/pgbench" -h "$W" -p $PORT -U postgres -i -s "$SCALE" postgres >"$W/init.log" 2>&1
	run "$BIN/pgbench" -h "$W" -p $PORT -U postgres -c "$CLIENTS" -T "$SECS" postgres 2>&1 | grep -E '^tps'
	run "$BIN/pg_ctl" -D "$W/data" -w -m immediate stop >/dev/null
	exit 0
fi
run "$TOOL" init "$W/shadow" "$W/data" || exit 1
# shellcheck disable=SC2086
run LD_PRELOAD="$LIB" POWERLOSS_SHADOW="$W/shadow" POWERLOSS_BREAK="${POWERLOSS_BREAK:-}" \
	POWERLOSS_BREAK_PATH="${POWERLOSS_BREAK_PATH:-}" POWERLOSS_TRACE="${POWERLOSS_TRACE:-}" ${PL_SMOKE_ENV:-} \
	"$BIN/pg_ctl" -D "$W/data" -l "$W/server.log" -w start >/dev/null || { echo "smoke: start failed"; cat "$W/server.log"; exit 1; }
PGHOST=$W
export PGHOST
run "$BIN/pgbench" -h "$W" -p $PORT -U postgres -i -s "$SCALE" postgres >"$W/init.log" 2>&1 || { echo "smoke: pgbench -i failed"; exit 1; }
# a checkpoint inside the window: recovery then starts after it, so the data
# files' persists (the checkpoint's fsyncs, or nvm_data_persist's) matter
run "$BIN/psql" -h "$W" -p $PORT -U postgres -XAtq -d postgres -c CHECKPOINT || exit 1
run "$BIN/pgbench" -h "$W" -p $PORT -U postgres -c "$CLIENTS" -T "$SECS" postgres >"$W/pgbench.log" 2>&1 &
BENCH=$!
# The cut.  Not a signal to a process group: PostgreSQL's children call
# setsid().  powerloss freeze closes the shadow's persist gate (no persist
# starts, those under way finish) and stops every process under the shadow.
if [ -n "${PL_SMOKE_CUT:-}" ]; then
	# the cut at a chosen persist: PL_SMOKE_CUT persist events from now
	echo "cut at event $(run "$TOOL" cut "$W/shadow" "+$PL_SMOKE_CUT")"
	run "$TOOL" cut-wait "$W/shadow" $((SECS + 30)) >/dev/null || { echo "smoke: no cut"; run "$TOOL" kill "$W/shadow"; exit 1; }
	grep 'cut before persist' "$W/server.log"
else
	# a random moment in the last second of the run (pgbench still committing)
	sleep $((SECS - 1)).$(( $(od -An -N1 -tu1 /dev/urandom) % 9 + 1 ))
	run "$TOOL" freeze "$W/shadow" || { run "$TOOL" kill "$W/shadow"; exit 1; }
fi
T0=$(date +%s.%N)
run "$TOOL" materialize "$W/shadow" "$W/after" --real "$W/data" "$@" || { run "$TOOL" kill "$W/shadow"; echo "smoke: materialize failed"; exit 1; }
echo "materialize took $(echo "$(date +%s.%N) - $T0" | bc) s"
run "$TOOL" kill "$W/shadow"
wait $BENCH 2>/dev/null
# what the killed postmaster left outside the data directory
rm -f "$W"/.s.PGSQL.$PORT "$W"/.s.PGSQL.$PORT.lock
run "$TOOL" stats "$W/shadow" >"$W/stats.txt"
grep -E 'tps|processed' "$W/pgbench.log"
cat "$W/stats.txt"

# after the cut: a server with nothing preloaded on the materialized directory
chmod 700 "$W/after"
"$BIN/pg_controldata" "$W/after" | grep -E 'cluster state|Latest checkpoint location'
rm -f "$W/after/postmaster.pid"
run "$BIN/pg_ctl" -D "$W/after" -l "$W/after.log" -w -t 120 start >/dev/null || { echo "smoke: FAIL (no start after the cut)"; tail -n 20 "$W/after.log"; exit 1; }
q() { run "$BIN/psql" -h "$W" -p $PORT -U postgres -XAtq -d postgres -c "$1"; }
ACC=$(q "SELECT count(*) FROM pgbench_accounts")
SUMS=$(q "SELECT (SELECT sum(abalance) FROM pgbench_accounts), (SELECT sum(tbalance) FROM pgbench_tellers), (SELECT sum(bbalance) FROM pgbench_branches), (SELECT coalesce(sum(delta),0) FROM pgbench_history), (SELECT count(*) FROM pgbench_history)")
run "$BIN/pg_ctl" -D "$W/after" -w stop >/dev/null
grep -E 'redo (starts|done)|database system was|ready to accept' "$W/after.log"
echo "accounts $ACC; balances accounts|tellers|branches|history-deltas|history-rows: $SUMS"
A=$(echo "$SUMS" | cut -d'|' -f1); T=$(echo "$SUMS" | cut -d'|' -f2)
BR=$(echo "$SUMS" | cut -d'|' -f3); H=$(echo "$SUMS" | cut -d'|' -f4)
if [ "$ACC" = $((SCALE * 100000)) ] && [ "$A" = "$T" ] && [ "$T" = "$BR" ] && [ "$BR" = "$H" ] &&
	grep -q 'redo done' "$W/after.log"; then
	echo "smoke: ok"
else
	echo "smoke: FAIL"
	exit 1
fi
