"""The NoBench benchmark at 3K objects (its smoke run): every configuration and peer answers
all twelve queries, and every answer agrees."""

from __future__ import annotations

import json

import pytest

from tesseradb.bench import nobench, run_benchmark
from tesseradb.bench.nobench import CONFIGURATIONS, PEER_SYSTEMS, QUERIES, NoBench, enc, parameters


@pytest.mark.bench
@pytest.mark.server
@pytest.mark.slow
def test_nobench_3k_runs_every_configuration_and_agrees() -> None:
    report = run_benchmark("nobench", "test", repeat=1, warmup=0)
    cases = {(m.system, m.case) for m in report.results}
    for system in ("tessera", *CONFIGURATIONS, *PEER_SYSTEMS):
        for case in ("load", *QUERIES, "q12"):
            assert (system, case) in cases, (system, case)
        if system.startswith("tessera"):
            assert report.value(system, "load_memory") > 0, system
    assert {c.case for c in report.checks} == set(QUERIES)
    assert report.agree, [c for c in report.checks if not c.agree]


def test_generator_follows_the_issue() -> None:
    assert enc(5) == "GBRDCMBR"  # base32 of "0b101"
    bench = NoBench(1000)
    docs = list(bench.documents())
    assert sorted(d["num"] for d in docs) == list(range(1000))
    assert [d["num"] for d in docs] != list(range(1000))  # shuffled
    d = next(x for x in docs if x["num"] == 40)
    assert d["str1"] == enc(40) and d["str2"] == enc(540) and d["dyn1"] == enc(40)
    assert d["nested_obj"] == {"str": enc(540), "num": 540} and d["thousandth"] == 40
    assert d["bool"] is False and d["dyn2"] == enc(40) and len(d["nested_arr"]) == 0
    assert [k for k in d if k.startswith("sparse_")] == [f"sparse_40{j}" for j in range(10)]
    assert json.dumps(docs) == json.dumps(list(NoBench(1000).documents()))  # deterministic
    params = parameters(1000, 3, {"the": 1, "of": 2})
    assert len(params["q6"]) == 3 and params["q6"][0]["hi"] - params["q6"][0]["lo"] == 0


def test_big_answers_compare_by_digest_in_any_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nobench, "DIGEST_ABOVE", 2)
    objects = [{"a": 1, "b": "x"}, {"b": "y", "a": 2}, {"a": 3}]
    digest = nobench.canonical_objects(objects)
    assert digest == nobench.canonical_objects([{"a": 2, "b": "y"}, {"a": 3}, {"b": "x", "a": 1}])
    assert digest[0].startswith("3 objects, sha256 ")
    assert digest != nobench.canonical_objects([*objects[:2], {"a": 4}])
    assert nobench.canonical_objects(objects[:2]) == sorted(
        json.dumps(o, sort_keys=True) for o in objects[:2]
    )
