"""bench/tpch/methods.py: ``./pgnvm tpch --method`` (cold, prewarm, warm): which runs are
made in which order, where the server restarts and what is prewarmed; the option."""

from __future__ import annotations

import argparse

import pytest

from bench.tpch import methods, runner

M = methods.METHODS


def _plan(steps: list[methods.Step[str]]) -> list[tuple[str, int, int, bool]]:
    return [(s.config, s.query, s.rep, s.restart) for s in steps]


def test_cold_restarts_every_run_and_interleaves_the_configurations() -> None:
    got = methods.schedule(M["cold"], ["a", "b"], [1, 6], 2)
    assert _plan(got) == [(c, q, rep, True) for rep in (1, 2) for q in (1, 6) for c in ("a", "b")]
    assert not any(s.warmup for s in got)
    # only the configuration's own prewarm (mem_limit)
    assert not methods.prewarms(M["cold"], False) and methods.prewarms(M["cold"], True)


def test_prewarm_is_cold_order_with_a_prewarm_for_every_configuration() -> None:
    assert _plan(methods.schedule(M["prewarm"], ["a", "b"], [1, 6], 2)) == _plan(
        methods.schedule(M["cold"], ["a", "b"], [1, 6], 2)
    )
    assert methods.prewarms(M["prewarm"], False) and methods.prewarms(M["prewarm"], True)


def test_warm_starts_once_per_configuration_and_discards_a_first_run() -> None:
    got = methods.schedule(M["warm"], ["a", "b"], [1, 6], 2)
    assert _plan(got) == [
        ("a", 1, 0, True),  # the one start of a, then the warm-up run of Q1
        ("a", 1, 1, False),
        ("a", 1, 2, False),
        ("a", 6, 0, False),
        ("a", 6, 1, False),
        ("a", 6, 2, False),
        ("b", 1, 0, True),
        ("b", 1, 1, False),
        ("b", 1, 2, False),
        ("b", 6, 0, False),
        ("b", 6, 1, False),
        ("b", 6, 2, False),
    ]
    assert [s.warmup for s in got] == [s.rep == 0 for s in got]
    assert sum(s.restart for s in got) == 2
    assert not methods.prewarms(M["warm"], False) and methods.prewarms(M["warm"], True)


def test_every_method_says_what_it_means_and_its_order() -> None:
    assert methods.DEFAULT == "cold" and set(methods.NAMES) == {"cold", "prewarm", "warm"}
    for m in M.values():
        assert m.doc and methods.order_text(m)
    assert "warm-up" in methods.order_text(M["warm"])
    assert runner.Options().method == "cold"


@pytest.mark.parametrize(
    ("arg", "name"), [(None, "cold"), ("warm", "warm"), ("prewarm", "prewarm")]
)
def test_method_option(monkeypatch: pytest.MonkeyPatch, arg: str | None, name: str) -> None:
    from bench.tpch import cli as tpch_cli

    seen: list[runner.Options] = []
    monkeypatch.setattr(runner, "run", lambda o: seen.append(o) or 0)
    p = argparse.ArgumentParser()
    tpch_cli.register(p.add_subparsers())
    args = p.parse_args(["tpch", "--sf", "0.01"] + (["--method", arg] if arg else []))
    assert args.func(args) == 0
    assert seen[0].method == name and seen[0].how is M[name]
    r = runner.Runner(seen[0])
    assert r.plan_doc()["method"] == name and r.plan_doc()["method_doc"] == M[name].doc
    assert r.plan_doc()["order"] == methods.order_text(M[name])
    with pytest.raises(SystemExit):
        p.parse_args(["tpch", "--method", "hot"])
