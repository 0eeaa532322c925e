"""The lists' "≥ 20× the API server over HTTPS" rows in every committed run, beside the floor's.

    .venv/bin/python -m bench.history [--runs 7] [--scheme HTTPS]

Reads ``docs/benchmarks.json`` as each commit that changed it left it (newest first; a
commit that only re-rendered the same run is shown once) and, for Q1–Q3 at each number of
connections, prints the lesser of the two ratios a target row judges (the API server's p50
over the side's, the side's requests a second over the API server's) for the gateway and
for the floor of the same row.

Why. The floor (``bench.floor``) is a server of the same bytes doing no work on the same
uvicorn and TLS, measured in the same rounds. A run whose floor is under 20× the API server
on a row had an API server quicker at that hour than any server on this stack could beat by
20×; one run's table shows that once, this shows whether it is the rule for a row.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

from bench.report import TIMES_THE_API_SERVER, query_ratios

__all__ = ["committed_runs", "lesser_ratios", "main"]

_RESULTS = "docs/benchmarks.json"
_QUERIES = ("Q1", "Q2", "Q3")


def committed_runs(repo: Path, limit: int, path: str = _RESULTS) -> list[tuple[str, str, dict]]:
    """(commit, its date, the results) for the newest ``limit`` runs committed at ``path`` in
    ``repo``; a commit whose queries are those of the run before it (a re-render) is skipped."""
    log = subprocess.run(["git", "log", "--format=%h %cd", "--date=format:%Y-%m-%d %H:%M", "--",
                          path], cwd=repo, capture_output=True, text=True, check=True).stdout
    runs: list[tuple[str, str, dict]] = []
    last = None
    for line in log.splitlines():
        commit, date = line.split(" ", 1)
        shown = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=repo, capture_output=True,
                               text=True)
        if shown.returncode != 0:  # the commit deleted it
            continue
        results = json.loads(shown.stdout)
        queries = results.get("queries", {}).get("runs")
        if queries is None or queries == last:
            continue
        last = queries
        runs.append((commit, date, results))
        if len(runs) == limit:
            break
    return runs


def lesser_ratios(results: dict,
                  scheme: str = "HTTPS") -> dict[tuple[str, int], tuple[float, float | None]]:
    """For Q1–Q3 at each number of connections: (the gateway's, the floor's) lesser ratio to
    the API server over ``scheme``; the floor's is ``None`` where the run did not measure it,
    and a row the run did not measure is left out."""
    q = results["queries"]
    runs = q["runs"]

    def lesser(name: str, conns: int, side: str) -> float | None:
        if not runs.get(f"{name}|{conns}|{side}"):
            return None
        return min(query_ratios(q, name, conns, side))

    out: dict[tuple[str, int], tuple[float, float | None]] = {}
    for name in _QUERIES:
        for conns in q["connections"]:
            if not runs.get(f"{name}|{conns}|apiserver"):
                continue
            gateway = lesser(name, conns, f"gateway {scheme}")
            if gateway is not None:
                out[(name, conns)] = (gateway, lesser(name, conns, f"floor {scheme}"))
    return out


def table(runs: list[tuple[str, str, dict]], scheme: str = "HTTPS") -> str:
    """One line a run: each row's gateway and floor ratios, a ratio under the target in bold; then how
    many rows missed, and in how many of those the floor missed too."""
    ratios = [(commit, date, lesser_ratios(results, scheme)) for commit, date, results in runs]
    cells = sorted({cell for _, _, row in ratios for cell in row})
    lines = ["| committed | " + " | ".join(f"{name} {conns} conn" for name, conns in cells) + " |",
             "|---|" + "---:|" * len(cells)]
    missed = floor_missed = 0
    for commit, date, row in ratios:
        shown = []
        for cell in cells:
            if cell not in row:
                shown.append("")
                continue
            gateway, floor = row[cell]
            missed += gateway < TIMES_THE_API_SERVER
            floor_missed += (gateway < TIMES_THE_API_SERVER and floor is not None
                             and floor < TIMES_THE_API_SERVER)
            shown.append(f"{_bold(gateway)} (floor {_bold(floor) if floor is not None else '—'})")
        lines.append(f"| {date} `{commit}` | " + " | ".join(shown) + " |")
    times = TIMES_THE_API_SERVER
    lines.append(f"\nRows under {times}× the API server over {scheme}: {missed} in {len(ratios)} "
                 f"runs; the floor under {times}× on {floor_missed} of them.")
    return "\n".join(lines)


def _bold(ratio: float) -> str:
    return f"**{ratio:.1f}×**" if ratio < TIMES_THE_API_SERVER else f"{ratio:.1f}×"


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.history",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="the newest this many runs")
    parser.add_argument("--scheme", choices=("HTTPS", "HTTP"), default="HTTPS")
    args = parser.parse_args()
    print(table(committed_runs(Path.cwd(), args.runs), args.scheme))


if __name__ == "__main__":
    main()
