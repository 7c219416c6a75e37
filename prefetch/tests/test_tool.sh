#!/bin/sh
# test_tool.sh - tests of nvmpf-topology over the fake sysfs trees in
# tests/sysfs/: its JSON and text answers are compared with tests/tool/*
# (written by the tool, each checked by hand against tests/placement.cases),
# malformed arguments give exit status 2 and the parser's error, and on this
# machine it answers valid JSON.  Run from prefetch/ (by make test); prints
# one line per test and "N passed, M failed" like the C tests.
#
#   NVMPF_TOPOLOGY   the tool (default build/nvmpf-topology)

tool=${NVMPF_TOPOLOGY:-build/nvmpf-topology}
sysfs=tests/sysfs
passed=0
failed=0
out=$(mktemp)
err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT

# result NAME OK [DETAIL]: count and print one test's outcome.
result() {
	if [ "$2" = 1 ]; then
		passed=$((passed + 1))
		echo "ok   $1"
	else
		failed=$((failed + 1))
		echo "FAIL $1${3:+: $3}"
	fi
}

# answer NAME EXPECTED ARG...: exit status 0 and stdout equal to tests/tool/EXPECTED.
answer() {
	name=$1 expected=tests/tool/$2
	shift 2
	"$tool" "$@" >"$out" 2>"$err"
	rc=$?
	if [ $rc -eq 0 ] && cmp -s "$out" "$expected"; then
		result "$name" 1
	else
		diff "$expected" "$out" | head -n 20
		result "$name" 0 "exit status $rc, output differs from $expected"
	fi
}

# refused NAME MESSAGE ARG...: exit status 2, nothing on stdout, MESSAGE on stderr.
refused() {
	name=$1 message=$2
	shift 2
	"$tool" "$@" >"$out" 2>"$err"
	rc=$?
	if [ $rc -eq 2 ] && [ ! -s "$out" ] && grep -qF -- "$message" "$err"; then
		result "$name" 1
	else
		result "$name" 0 "exit status $rc, stderr: $(cat "$err")"
	fi
}

# json_ok NAME FILE [PYTHON-CHECK]: FILE parses as JSON and the check holds
# for it as d (skipped without python3).
json_ok() {
	if ! command -v python3 >/dev/null 2>&1; then
		echo "skip $1: no python3"
		return
	fi
	if python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert eval(sys.argv[2]), sys.argv[2]' \
		"$2" "${3:-True}" 2>"$err"; then
		result "$1" 1
	else
		result "$1" 0 "$(tail -n 1 "$err")"
	fi
}

# Fake machines: 2 cores x 2 SMT threads (all usable; siblings outside the
# affinity; one core), this VM's shape, a single CPU, unreadable topology.
answer smt_2x2_json smt-2x2.json --json --sysfs $sysfs/smt-2x2 --cpus 0-3 --home 0 m1 m2 m3 2,3 1,9
answer smt_2x2_text smt-2x2.txt --sysfs $sysfs/smt-2x2 --cpus 0-3 --home 0 m1 m2 m3 2,3 1,9
answer smt_siblings_outside smt-2x2-siblings-outside.json --json --sysfs $sysfs/smt-2x2 --cpus 0,2 --home 0
answer smt_one_core smt-2x2-one-core.json --json --sysfs $sysfs/smt-2x2 --cpus 0-1 --home 1
answer vm_2x1 vm-2x1.json --json --sysfs $sysfs/vm-2x1 --cpus 0-1 --home 0
answer single_cpu_default_home single.json --json --sysfs $sysfs/single --cpus 0
answer no_topology no-topology.json --json --sysfs $sysfs/no-topology --cpus 0-1 --home 1
for f in tests/tool/*.json; do
	json_ok "json_valid_$(basename "$f" .json)" "$f"
done

# The parser's errors, and the options'.
syntax='expected m1, m2, m3 or a list of CPU numbers such as "1", "2,3" or "4-7"'
refused bad_mapping "invalid mapping \"m4\": $syntax" --json m1 m4
refused bad_range 'invalid mapping "4-": a CPU range needs an upper bound, as in "4-7"' 4-
refused too_many_cpus 'at most 32 helper CPUs can be listed' --json 0-40
refused bad_cpus 'invalid --cpus "1,"' --json --cpus 1,
refused bad_home 'invalid --home "5000"' --json --home 5000
refused bad_option 'unknown option' --bogus

# This machine: valid JSON with the documented keys; a JSON-escaped note.
"$tool" --json >"$out" 2>"$err"
result this_machine_exit_status "$([ $? -eq 0 ] && echo 1)" "$(cat "$err")"
json_ok this_machine_json "$out" \
	'set(d) >= {"usable_cpus", "topology_known", "note", "smt", "physical_cores", "mappings"} and sorted(d["mappings"]) == ["m1", "m2", "m3"] and d["mappings"]["m1"]["requested"] == "m1"'
"$tool" --json --sysfs "$sysfs/no such \"dir\" \\" --cpus 0 >"$out" 2>"$err"
json_ok json_escaping "$out" \
	'd["note"] == "CPU topology unreadable under tests/sysfs/no such \"dir\" \\, every CPU taken as its own core"'

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
