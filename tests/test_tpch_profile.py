"""./pgnvm tpch --profile: perf report parsing and profile.md."""

from __future__ import annotations

from bench.tpch import profile

REPORT = """# To display the perf.data header info, please use --header/--header-only options.
#
# Samples: 7K of event 'cpu-clock'
# Overhead  Shared Object      Symbol
# ........  .................  ..............................
#
    36.90%  postgres           [.] pg_checksum_page_readonly
    12.95%  postgres           [.] ExecScanHashBucket
     3.51%  [kernel.kallsyms]  [k] next_uptodate_folio
     1.02%  libc.so.6          [.] __memmove_avx_unaligned_erms
"""


def test_parse_report() -> None:
    top = profile.parse_report(REPORT)
    assert [t["symbol"] for t in top] == [
        "pg_checksum_page_readonly",
        "ExecScanHashBucket",
        "next_uptodate_folio",
        "__memmove_avx_unaligned_erms",
    ]
    assert top[0]["pct"] == 36.9 and top[0]["dso"] == "postgres" and not top[0]["kernel"]
    assert top[2]["kernel"]
    assert len(profile.parse_report(REPORT, top=2)) == 2
    assert profile.parse_report("# only comments\n") == []


def test_render() -> None:
    recs = [
        {"query": 5, "config": "nvm_se2", "rep": 1, "wall_s": 4.14,
         "profile": profile.parse_report(REPORT)},
        {"query": 5, "config": "nvm_se2", "rep": 2, "wall_s": 4.0},  # not profiled
        {"query": 6, "config": "mem_limit", "rep": 1, "wall_s": 0.5, "profile": "perf failed"},
    ]  # fmt: skip
    text = profile.render(recs)
    assert "## Q05 nvm_se2 (run 1, 4.140 s)" in text
    assert "| 36.9% | `pg_checksum_page_readonly` | postgres |" in text
    assert "| 3.5% | `next_uptodate_folio` [k] | [kernel.kallsyms] |" in text
    assert "run 2" not in text
    assert "## Q06 mem_limit (run 1, 0.500 s)\n\nnot profiled: perf failed" in text
