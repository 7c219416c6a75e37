from __future__ import annotations

from bench.testsuite.checks.truncated import compare_outcomes, describe

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
