#!/bin/sh
# run-tests.sh - run each test command, echo its output, and print one
# closing line "N passed, M failed" summed over all of them.  A command that
# exits non-zero without failing a test, or prints no closing line, counts as
# one more failure.
#
#   run-tests.sh "CMD ARGS" ...    (each command is split at blanks)
passed=0
failed=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for cmd in "$@"; do
	echo "== $cmd"
	$cmd >"$out" 2>&1
	rc=$?
	cat "$out"
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out" | tail -n 1)
	if [ -z "$line" ]; then
		echo "FAIL $cmd: no closing line (exit status $rc)"
		failed=$((failed + 1))
		continue
	fi
	p=${line%% passed*}
	f=${line#* passed, }
	f=${f%% failed*}
	passed=$((passed + p))
	failed=$((failed + f))
	if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "FAIL $cmd: exit status $rc"
		failed=$((failed + 1))
	fi
done
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
