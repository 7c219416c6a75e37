#!/bin/sh
# test_cli.sh - storagebench's command line: bad input is refused with a
# clear message and exit status 2 before any file is written; a tiny run of
# each benchmark prints one JSON document of schema version 1 (checked with
# python3).  Prints one line per test and "N passed, M failed".
#
#   SB_BIN=BUILD/storagebench tests/test_cli.sh    (or the binary as $1)
bin=${1:-${SB_BIN:?usage: test_cli.sh STORAGEBENCH (or SB_BIN=...)}}
base=${SB_TEST_DIR:-/tmp}
dir=$(mktemp -d "$base/storagebench-cli-XXXXXX")
trap 'rm -rf "$dir"' EXIT
passed=0
failed=0

ok() { echo "ok   $1"; passed=$((passed + 1)); }
bad() { echo "FAIL $1: $2"; failed=$((failed + 1)); }

# refused NAME PATTERN ARGS...: exit status 2, PATTERN on stderr, no file made
refused() {
	name=$1 pattern=$2
	shift 2
	"$bin" "$@" >"$dir/out" 2>"$dir/err"
	rc=$?
	if [ $rc -ne 2 ]; then bad "$name" "exit status $rc, not 2"; return; fi
	if ! grep -q -- "$pattern" "$dir/err"; then bad "$name" "stderr: $(cat "$dir/err")"; return; fi
	if ls "$dir"/sb-* >/dev/null 2>&1; then bad "$name" "files were written"; return; fi
	ok "$name"
}

refused unknown_benchmark "unknown benchmark 'scan'" scan --dir "$dir"
refused unknown_path "unknown path 'fsync'" bufman --dir "$dir" --path fsync
refused path_of_other_benchmark "not one of this benchmark's" bufman --dir "$dir" --path pmemlog
refused odirect_not_for_bufman "not one of this benchmark's" bufman --dir "$dir" --path odirect
refused no_dir "--dir is required" tablescan
refused dir_missing "is not a directory" tablescan --dir "$dir/nope"
refused too_large "MiB free" tablescan --dir "$dir" --file-size 1000000G
refused bad_size "not a size: '12q'" tablescan --dir "$dir" --file-size 12q
refused page_not_4k "multiple of 4k" tablescan --dir "$dir" --page-size 6000
refused write_ratio "--write-ratio must be" bufman --dir "$dir" --write-ratio 120%
refused entry_larger_than_log "must not exceed --file-size" logging --dir "$dir" --entry-size 2M --file-size 1M
refused threads "--threads must be" tablescan --dir "$dir" --threads 0

n=$("$bin" paths | wc -l)
if [ "$n" -eq 10 ]; then ok paths_listed; else bad paths_listed "$n lines"; fi

# check_doc NAME ARGS...: a tiny run's document
check_doc() {
	name=$1
	shift
	if ! "$bin" "$@" --dir "$dir" --file-size 256k --warmup 1 --reps 2 >"$dir/doc.json" 2>"$dir/err"; then
		bad "$name" "exit $?: $(cat "$dir/err")"
		return
	fi
	if python3 - "$dir/doc.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["schema"] == "storagebench" and d["schema_version"] == 1, d
for k in ("benchmark", "path", "params", "env", "runs", "summary"):
    assert k in d, k
assert len(d["runs"]) == 3 and [r["warmup"] for r in d["runs"]] == [True, False, False]
for r in d["runs"]:
    assert r["bytes"] > 0 and r["ops"] > 0 and r["gib_per_s"] > 0, r
    assert len(r["threads"]) == d["params"]["threads"]
s = d["summary"]
assert s["reps"] == 2 and s["gib_per_s"]["min"] <= s["gib_per_s"]["median"] <= s["gib_per_s"]["max"]
PY
	then ok "$name"; else bad "$name" "document: $(head -c 300 "$dir/doc.json")"; fi
}

check_doc json_tablescan tablescan --path mmap --threads 2
check_doc json_bufman bufman --path pmem2 --write-ratio 0.8 --pool 64k
check_doc json_logging logging --path pmem2log --entry-size 128

# --drop-caches drops the benchmark's own files, never the whole page cache: no write to
# /proc/sys/vm/drop_caches (global; on tmpfs it slows later mappings of the emulated NVM),
# a POSIX_FADV_DONTNEED per file instead, and every repetition says it dropped them
drop_caches() {
	if ! command -v strace >/dev/null 2>&1; then bad drop_caches "strace is not installed"; return; fi
	if ! strace -f -e trace=openat,fadvise64 -o "$dir/trace" "$bin" tablescan --path pread --dir "$dir" \
		--file-size 256k --warmup 0 --reps 2 --drop-caches >"$dir/doc.json" 2>"$dir/err"; then
		bad drop_caches "exit $?: $(cat "$dir/err")"
		return
	fi
	if grep -q "/proc/sys/vm/drop_caches" "$dir/trace"; then
		bad drop_caches "opened /proc/sys/vm/drop_caches: $(grep drop_caches "$dir/trace" | head -1)"
		return
	fi
	n=$(grep -c "fadvise64(.*POSIX_FADV_DONTNEED" "$dir/trace")
	if [ "$n" -lt 2 ]; then bad drop_caches "$n POSIX_FADV_DONTNEED calls for 2 repetitions"; return; fi
	if python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert all(r["caches_dropped"] is True for r in d["runs"]), d["runs"]' "$dir/doc.json"
	then ok drop_caches; else bad drop_caches "document: $(head -c 300 "$dir/doc.json")"; fi
}
drop_caches

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
