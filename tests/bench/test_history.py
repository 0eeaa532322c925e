"""The ≥ 20× rows across committed runs: the ratios read, the runs found in git's history."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from bench.history import committed_runs, lesser_ratios, table


def _results(api_p50: float, api_rate: float, gateway: tuple[float, float],
             floor: tuple[float, float] | None = None) -> dict:
    def runs(p50: float, rate: float) -> list[dict]:
        return [{"p50_ms": p50, "requests_per_second": rate}] * 2

    out = {"Q3|1|apiserver": runs(api_p50, api_rate), "Q3|1|gateway HTTPS": runs(*gateway)}
    if floor:
        out["Q3|1|floor HTTPS"] = runs(*floor)
    return {"queries": {"connections": [1], "runs": out}}


def test_each_row_judges_the_lesser_of_its_two_ratios_for_the_gateway_and_its_floor():
    ratios = lesser_ratios(_results(9.0, 80.0, gateway=(0.5, 2_000.0), floor=(0.45, 2_400.0)))
    # the gateway: 18× lower p50 but 25× the requests; the floor: 20× and 30×
    assert ratios == {("Q3", 1): (18.0, 20.0)}
    assert lesser_ratios(_results(9.0, 80.0, gateway=(0.3, 1_200.0))) == {("Q3", 1): (15.0, None)}
    assert lesser_ratios(_results(9.0, 80.0, gateway=(0.3, 1_200.0)), scheme="HTTP") == {}


def test_the_table_counts_the_rows_missed_and_those_the_floor_missed_too():
    runs = [("aaa", "2026-12-04 06:19", _results(9.0, 80.0, (0.5, 2_000.0), (0.5, 2_000.0))),
            ("bbb", "2026-12-03 22:57", _results(9.0, 80.0, (0.5, 2_000.0), (0.4, 2_400.0))),
            ("ccc", "2026-12-03 20:00", _results(9.0, 80.0, (0.4, 2_000.0)))]
    text = table(runs)
    assert "| 2026-12-04 06:19 `aaa` | **18.0×** (floor **18.0×**) |" in text
    assert "| 2026-12-03 22:57 `bbb` | **18.0×** (floor 22.5×) |" in text
    assert "| 2026-12-03 20:00 `ccc` | 22.5× (floor —) |" in text
    assert text.endswith("2 in 3 runs; the floor under 20× on 1 of them.")


def test_runs_are_read_from_git_newest_first_and_a_re_render_of_the_same_run_shown_once(tmp_path):
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")

    def commit(results: dict, message: str) -> None:
        path = tmp_path / "docs" / "benchmarks.json"
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(results))
        subprocess.run(["git", "add", "-A"], cwd=tmp_path, env=env, check=True)
        subprocess.run(["git", "-c", "commit.gpgsign=false", "commit", "-qm", message],
                       cwd=tmp_path, env=env, check=True)

    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    first, second = _results(9.0, 80.0, (0.5, 2_000.0)), _results(8.0, 90.0, (0.4, 2_000.0))
    commit(first, "first run")
    commit(second, "second run")
    commit({**second, "size": {"note": "re-rendered"}}, "the same run's report again")
    (tmp_path / "other").write_text("not a run")
    commit(second | {"size": {"note": "re-rendered"}}, "nothing of the results")
    runs = committed_runs(Path(tmp_path), limit=5)
    newest = {**second, "size": {"note": "re-rendered"}}
    assert [results for _, _, results in runs] == [newest, first]
    assert len(committed_runs(Path(tmp_path), limit=1)) == 1
