from __future__ import annotations

import hashlib

from bench.testsuite.digest import compare_digests, digest_rows


def test_digest_is_md5_of_tab_separated_lines() -> None:
    rows = [(b"1", b"abc"), (b"2", None)]
    d, n = digest_rows(rows)
    assert n == 2
    assert d == hashlib.md5(b"1\tabc\n2\t\\N\n").hexdigest()


def test_digest_sensitive_to_order_values_null_and_separators() -> None:
    base, _ = digest_rows([(b"1",), (b"2",)])
    assert digest_rows([(b"2",), (b"1",)])[0] != base
    assert digest_rows([(b"1",), (b"3",)])[0] != base
    assert digest_rows([(None,)])[0] != digest_rows([(b"\\N",)])[0]
    assert digest_rows([(b"",)])[0] != digest_rows([(None,)])[0]
    assert digest_rows([(b"a\tb",)])[0] != digest_rows([(b"a", b"b")])[0]
    assert digest_rows([(b"a\nb",)])[0] != digest_rows([(b"a",), (b"b",)])[0]


def test_str_and_bytes_agree() -> None:
    assert digest_rows([("é", "x")]) == digest_rows([("é".encode(), b"x")])


def test_empty_result() -> None:
    assert digest_rows([]) == (hashlib.md5(b"").hexdigest(), 0)


def test_compare_digests_names_query_and_engine() -> None:
    ref = {"A.q1": "aaa/1", "A.q2": "bbb/2", "B.q3": "ccc/3"}
    assert compare_digests(ref, dict(ref), "se1") == []
    got = {"A.q1": "aaa/1", "A.q2": "XXX/2", "B.q4": "ddd/1"}
    mm = compare_digests(ref, got, "se1")
    assert [(m.query, m.engine) for m in mm] == [("A.q2", "se1"), ("B.q3", "se1"), ("B.q4", "se1")]
    text = [m.describe() for m in mm]
    assert "A.q2" in text[0] and "se1" in text[0] and "XXX/2" in text[0] and "bbb/2" in text[0]
    assert "produced no result" in text[1]
    assert "not in the base reference" in text[2]
