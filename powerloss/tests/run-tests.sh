#!/bin/sh
# run-tests.sh - libpowerloss's tests.
#
#   run-tests.sh BUILD            every scenario of pltest: setup (baseline),
#                                 powerloss init, run under the preload,
#                                 materialize, verify; the harsh model's
#                                 determinism; then each persist kind dropped
#                                 (POWERLOSS_BREAK) must make the scenarios
#                                 that rely on it fail verification.
#   run-tests.sh BUILD KIND       the plain scenarios with KIND dropped: shows
#                                 them failing (exit 1 if any does).
#
# Last line: "N passed, M failed".  Work directories go under $PL_TEST_DIR
# (default $TMPDIR or /tmp) and are removed at the end unless PL_KEEP=1.
B=$1
BREAK=$2
tool=$B/powerloss
lib=$(cd "$B" && pwd)/libpowerloss.so
pltest=$B/pltest
base=$(mktemp -d "${PL_TEST_DIR:-${TMPDIR:-/tmp}}/powerloss-test.XXXXXX") || exit 1
[ "${PL_KEEP:-0}" = 1 ] || trap 'rm -rf "$base"' EXIT
passed=0
failed=0

ok() { echo "ok   $*"; passed=$((passed + 1)); }
notok() { echo "FAIL $*"; failed=$((failed + 1)); }

# materialize options a scenario needs
opts() {
	case $1 in
	newfile_hint) echo "--dirs newfile" ;;
	harsh) echo "--harsh 1 --real $2/root" ;;
	esac
}

# scenario NAME BREAKKIND: 0 verified, 1 verification failed, 3 error.
# Leaves $d (its directory) and $d/log.
scenario() {
	d=$base/$1.${2:-none}
	mkdir -p "$d/root"
	"$pltest" "$1" setup "$d/root" >"$d/log" 2>&1 || return 3
	"$tool" init "$d/shadow" "$d/root" >>"$d/log" 2>&1 || return 3
	if [ "$1" = cutat ] || [ "$1" = freeze ]; then
		# cutat: stopped by the library at its 4th persist (cut-wait);
		# freeze: cut after 0.3 s (powerloss freeze); materialized while
		# stopped, then killed (powerloss kill)
		[ "$1" = cutat ] && { "$tool" cut "$d/shadow" 4 >>"$d/log" || return 3; }
		env LD_PRELOAD="$lib" POWERLOSS_SHADOW="$d/shadow" POWERLOSS_BREAK="$2" \
			"$pltest" "$1" run "$d/root" >>"$d/log" 2>&1 &
		pid=$!
		if [ "$1" = cutat ]; then
			"$tool" cut-wait "$d/shadow" 10 >>"$d/log" 2>&1
		else
			sleep 0.3
			"$tool" freeze "$d/shadow" >>"$d/log" 2>&1
		fi
		rc=$?
		[ $rc -eq 0 ] && "$tool" materialize "$d/shadow" "$d/out" >>"$d/log" 2>&1
		"$tool" kill "$d/shadow" >>"$d/log" 2>&1
		kill -KILL $pid 2>/dev/null
		wait $pid 2>/dev/null
		[ $rc -eq 0 ] || return 3
		"$pltest" "$1" verify "$d/out" >>"$d/log" 2>&1
		return
	fi
	env LD_PRELOAD="$lib" POWERLOSS_SHADOW="$d/shadow" POWERLOSS_BREAK="$2" \
		"$pltest" "$1" run "$d/root" >>"$d/log" 2>&1 || return 3
	# shellcheck disable=SC2046
	"$tool" materialize "$d/shadow" "$d/out" $(opts "$1" "$d") >>"$d/log" 2>&1 || return 3
	"$pltest" "$1" verify "$d/out" >>"$d/log" 2>&1
}

why() { grep -E 'not ok|pltest:|powerloss:|libpowerloss:' "$d/log" | head -n 3 | sed 's/^ *//' | tr '\n' ';'; }

if [ -n "$BREAK" ]; then
	for s in $("$pltest" list); do
		scenario "$s" "$BREAK"
		rc=$?
		if [ $rc -eq 0 ]; then ok "$s (POWERLOSS_BREAK=$BREAK)"
		else notok "$s (POWERLOSS_BREAK=$BREAK): $(why)"; fi
	done
	echo "$passed passed, $failed failed"
	[ $failed -eq 0 ]
	exit $?
fi

for s in $("$pltest" list); do
	scenario "$s" ""
	rc=$?
	if [ $rc -eq 0 ]; then ok "$s: $(grep -h -E '^(kept|materialized)' "$d/log" | tail -n 1)"
	else notok "$s (status $rc): $(why)"; cat "$d/log"; fi
done

# the harsh model: the same seed keeps the same lines, another seed others
d=$base/harsh.none
if [ -d "$d/shadow" ]; then
	"$tool" materialize "$d/shadow" "$d/out1b" --harsh 1 --real "$d/root" >/dev/null &&
	"$tool" materialize "$d/shadow" "$d/out2" --harsh 2 --real "$d/root" >/dev/null
	if cmp -s "$d/out/f" "$d/out1b/f"; then ok "harsh: seed 1 twice, same lines"
	else notok "harsh: seed 1 twice, different lines"; fi
	if cmp -s "$d/out/f" "$d/out2/f"; then notok "harsh: seeds 1 and 2 kept the same lines"
	else ok "harsh: seeds 1 and 2 keep different lines"; fi
	"$tool" materialize "$d/shadow" "$d/out0" >/dev/null
	if "$pltest" harsh verify "$d/out0" 2>&1 | grep -q "kept 0 of 255"; then
		ok "harsh: without --harsh no unpersisted line survives"
	else notok "harsh: without --harsh unpersisted lines survived"; fi
fi

# each dropped persist kind must make the scenarios that rely on it fail
while read -r s kinds; do
	for k in $kinds; do
		scenario "$s" "$k"
		rc=$?
		if [ $rc -eq 1 ]; then ok "POWERLOSS_BREAK=$k fails $s: $(why)"
		else notok "POWERLOSS_BREAK=$k did not fail $s (status $rc)"; fi
	done
done <<'TABLE'
newfile_dirsync fsync dirfsync
newfile_hint fsync
dirsync_only dirfsync
rename_dirsync fsync dirfsync
twoproc fsync
mmap_msync msync
hook hook
truncate_fsync fsync
osync fsync dirfsync
unlink_dirs dirfsync
newdir fsync dirfsync
cutat fsync dirfsync
freeze fsync dirfsync
TABLE

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
