#!/bin/sh
# run-tests.sh - run test binaries, echo their output, and print one closing
# line "N passed, M failed" summed over all of them.  A binary that exits
# non-zero or prints no closing line counts as one more failure.
#
#   run-tests.sh BIN...           plain run
#   run-tests.sh --tsan BIN...    ThreadSanitizer run: first checks that
#                                 $TSAN_CANARY (a deliberate race) is
#                                 reported; any TSan report fails a binary.
tsan=0
if [ "$1" = "--tsan" ]; then tsan=1; shift; fi
passed=0
failed=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT

if [ $tsan = 1 ]; then
	export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
	if [ -n "$TSAN_CANARY" ]; then
		"$TSAN_CANARY" >"$out" 2>&1
		rc=$?
		if [ $rc -eq 66 ] && grep -q "ThreadSanitizer: data race" "$out"; then
			echo "ok   tsan_canary (deliberate race detected)"
			passed=$((passed + 1))
		else
			echo "FAIL tsan_canary: ThreadSanitizer did not report the deliberate race (rc=$rc)"
			failed=$((failed + 1))
		fi
	fi
fi

for bin in "$@"; do
	echo "== $bin"
	"$bin" >"$out" 2>&1
	rc=$?
	cat "$out"
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out" | tail -n 1)
	if [ -z "$line" ]; then
		echo "FAIL $bin: no summary line (exit status $rc)"
		failed=$((failed + 1))
		continue
	fi
	p=$(echo "$line" | sed -E 's/^([0-9]+) passed.*/\1/')
	f=$(echo "$line" | sed -E 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/')
	passed=$((passed + p))
	failed=$((failed + f))
	if [ $tsan = 1 ] && grep -q "WARNING: ThreadSanitizer" "$out"; then
		echo "FAIL $bin: ThreadSanitizer report"
		failed=$((failed + 1))
	elif [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "FAIL $bin: exit status $rc"
		failed=$((failed + 1))
	fi
done
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
