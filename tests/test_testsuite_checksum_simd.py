"""Pure logic of the checksum_simd check: what it reads from the unit test and from prove."""

from __future__ import annotations

from bench.testsuite.checks.checksum_simd import prove_detail, unit_detail

UNIT_OK = """seed 42, 50000 random pages
variants: scalar avx2 avx512
163328 passed, 0 failed
"""

PROVE_OK = """# +++ tap install-check in src/test/checksum_simd +++
t/001_cross_check.pl .. ok
All tests successful.
Files=1, Tests=64, 41 wallclock secs ( 0.05 usr  0.01 sys +  8.10 cusr  4.02 csys = 12.18 CPU)
Result: PASS
"""


def test_unit_detail_names_counts_seed_and_variants() -> None:
    assert unit_detail(UNIT_OK) == "163328 passed, 0 failed (seed 42; variants scalar avx2 avx512)"


def test_unit_detail_of_a_file_run_and_of_no_summary() -> None:
    files = "3 files, 40 blocks (2 new: no checksum)\nvariants: scalar\n120 passed, 1 failed\n"
    assert unit_detail(files) == "120 passed, 1 failed (variants scalar)"
    assert unit_detail("Segmentation fault\n") is None


def test_prove_detail_pass_and_fail() -> None:
    assert prove_detail(PROVE_OK) == "64 tests in 1 file(s) passed"
    assert prove_detail(PROVE_OK.replace("Result: PASS", "Result: FAIL")) is None
    assert prove_detail("make: *** [installcheck] Error 2\n") is None
