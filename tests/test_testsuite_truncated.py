from __future__ import annotations

from bench.testsuite.outcomes import compare_outcomes, describe

ERR = {"sqlstate": "XX001", "message": 'could not read blocks 99..99 in file "<relfile>": x'}
REF = {"seqscan count(*)": {"result": [["8019"]]}, "cursor": ERR}


def test_describe() -> None:
    assert describe(ERR).startswith("ERROR XX001: could not read blocks 99..99")
    assert describe({"result": [["1"]]}) == "result [['1']]"


def test_same_outcomes_match() -> None:
    assert compare_outcomes(REF, {k: dict(v) for k, v in REF.items()}, "se1") == []


def test_different_message_sqlstate_or_result_is_reported() -> None:
    other_block = {**ERR, "message": ERR["message"].replace("99..99", "96..111")}
    got = {"seqscan count(*)": {"result": [["16000"]]}, "cursor": other_block}
    diffs = compare_outcomes(REF, got, "se1")
    assert len(diffs) == 2
    assert "seqscan count(*): base result [['8019']] / se1 result [['16000']]" == diffs[0]
    assert "96..111" in diffs[1] and "99..99" in diffs[1]
    crashed = {"seqscan count(*)": {"result": [["8019"]]}}
    assert compare_outcomes(REF, crashed, "se1") == [f"cursor: base {describe(ERR)} / se1 not run"]
    assert compare_outcomes(REF, {**REF, "cursor": {**ERR, "sqlstate": "58030"}}, "se1")


def test_outcome_of_a_result_and_the_reference_key(tmp_path) -> None:
    from bench.testsuite.context import source_key
    from bench.testsuite.outcomes import outcome

    assert outcome("base/5/1", lambda: [(1, "a"), (2, None)]) == {
        "result": [["1", "a"], ["2", "None"]]
    }
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("x = 1\n")
    b.write_text("y = 2\n")
    key = source_key("truncated", a, b)
    assert key.startswith("truncated:") and len(key) == len("truncated:") + 16
    assert source_key("truncated", a, b) == key
    b.write_text("y = 3\n")  # any edit of a source invalidates cached references
    assert source_key("truncated", a, b) != key
