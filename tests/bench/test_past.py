"""bench.past's report: the targets it checks and the tables, from a run's own results."""

from __future__ import annotations

import json
from pathlib import Path

from bench import past

RESULTS = json.loads((Path(__file__).resolve().parents[2] / "docs" / "benchmarks.json")
                     .read_text())["past"]


def test_the_targets_judge_each_goal_of_the_history_from_the_figures():
    rows = {target: (measured, met) for target, measured, met in past.targets(RESULTS)}
    writes = [r for t, r in rows.items() if t.startswith("changes written into")]
    assert len(writes) == 2 and all(met for _, met in writes)
    exact = [r for t, r in rows.items() if t.startswith("an Exact list")]
    assert len(exact) == 2 and all(met and "×" in measured for measured, met in exact)
    lists = [r for t, r in rows.items() if t.startswith("LISTs of Pods")]
    assert lists and all(measured == "0" and met for measured, met in lists)
    hot = [r for t, r in rows.items() if t.startswith("Q1–Q5")]
    assert len(hot) == 4 and not all(met for _, met in hot)  # missed in this run, and said


def test_the_tables_show_every_side_and_figure():
    table = past.table(RESULTS)
    assert table.count("\n") == 1 + 5 * len(RESULTS["connections"])
    figures = past.figures_table(RESULTS)
    for said in ("write rate", "bytes per change", "Exact list", "watch replay", "restarted",
                 "CPU %"):
        assert said in figures, said
    assert "0 LIST" in past.restart_text(
        {"pods": 150_000, "command": "python -m bench.past --restart-only",
         "restart": {"sqlite": {"ready_seconds": 6.1, "pod_lists": 0},
                     "postgresql_new_replica": {"ready_seconds": 7.9, "pod_lists": 0},
                     "off": {"ready_seconds": 22.6, "pod_lists": 1}}})
