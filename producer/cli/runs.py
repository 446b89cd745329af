"""``judgeq runs``: the runs in Redis and in the results folder, newest first."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from pydantic import ValidationError

from judgeq.errors import ConfigError, StoreError
from judgeq.judges import judge_name
from judgeq.report.model import RunReport

from .options import out_option, redis_option, settings_from

__all__ = ["runs"]


@click.command()
@redis_option
@out_option
@click.option(
    "--limit", type=click.IntRange(min=1), default=50, show_default=True, help="Most recent runs shown."
)
def runs(limit: int, **flags: Any) -> None:
    """List runs: those in Redis and the results folders (``judgeq run`` ones too)."""
    settings = settings_from(**flags)
    rows: dict[str, dict[str, Any]] = {}
    for folder in sorted(Path(settings.results_dir).glob("*/report.json")):
        row = _folder_row(folder.parent)
        if row:
            rows[row["run"]] = row
    try:
        from ..distributed import open_store
        from ..progress import snapshot

        store = open_store(settings)
        for run_id in store.runs(limit=limit):
            spec, snap = store.spec(run_id), snapshot(store, run_id)
            if spec is None or snap is None:
                continue
            cost = store.counters(run_id).get("cost_usd", 0.0)
            rows[run_id] = {
                "run": run_id,
                "where": "redis" + (" + folder" if run_id in rows else ""),
                "state": snap.state,
                "done": f"{snap.done}/{snap.total}",
                "rubric": f"{spec.rubric_source.removeprefix('builtin:')}",
                "judge": _judge(spec.judge_provider, spec.judge_model, spec.council),
                "started": spec.created_at[:19].replace("T", " "),
                "cost": f"${cost:.4f}" if not spec.unpriced_models() else "unknown",
            }
    except (StoreError, ConfigError) as exc:
        click.echo(f"judgeq: Redis not reachable ({exc}); listing results folders only", err=True)
    if not rows:
        click.echo("no runs")
        return
    shown = sorted(rows.values(), key=lambda r: r["started"], reverse=True)[:limit]
    cols = ("run", "where", "state", "done", "rubric", "judge", "started", "cost")
    widths = {c: max(len(c), *(len(str(r[c])) for r in shown)) for c in cols}
    click.echo("  ".join(c.upper().ljust(widths[c]) for c in cols).rstrip())
    for r in shown:
        click.echo("  ".join(str(r[c]).ljust(widths[c]) for c in cols).rstrip())


def _judge(provider: str, model: str, council: list[str] | None = None) -> str:
    first = judge_name(provider, model)
    return f"{first} +{len(council)}" if council else first


def _folder_row(folder: Path) -> dict[str, Any] | None:
    where = "folder" + (" (archived)" if (folder / "verdicts.jsonl.gz").exists() else "")
    try:
        document = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):  # not JSON (a write cut short): not a run's report
        return None
    try:
        # any version's report (a key this one does not know is left out, one it lacks defaults)
        report = RunReport.read(document)
    except (ValidationError, TypeError):  # JSON, but damaged: listed as far as it can be read
        return _damaged_row(folder, where, document)
    c, judge, cost = report.counts, report.judge, report.usage.estimated_cost_usd
    state = "partial" if report.partial else "finished"
    if report.rescored_from:
        state = f"rescored from {report.rescored_from}"
    return {
        "run": report.run_id,
        "where": where,
        "state": state,
        "done": f"{c.graded + c.null}/{c.total}",
        "rubric": report.rubric.name,
        "judge": _judge(judge.provider, judge.model, (judge.council or [])[1:]),
        "started": report.started_at[:19].replace("T", " "),
        "cost": f"${cost:.4f}" if cost is not None else "unknown",
    }


def _damaged_row(folder: Path, where: str, document: Any) -> dict[str, Any]:
    """A report the model cannot read (a part missing or of the wrong type), read key by key:
    what it has is shown, what it lacks is "?"."""
    doc = document if isinstance(document, dict) else {}

    def part(key: str) -> dict[str, Any]:
        value = doc.get(key)
        return value if isinstance(value, dict) else {}

    c, judge, rubric = part("counts"), part("judge"), part("rubric")
    graded, null, total = (c.get(k) for k in ("graded", "null", "total"))
    done = "?"
    if isinstance(graded, int) and isinstance(null, int) and isinstance(total, int):
        done = f"{graded + null}/{total}"
    council = judge.get("council")
    others = [str(m) for m in council[1:]] if isinstance(council, list) else []
    return {
        "run": str(doc.get("run_id") or folder.name),
        "where": where,
        "state": "report damaged",
        "done": done,
        "rubric": str(rubric.get("name") or "?"),
        "judge": _judge(str(judge.get("provider", "?")), str(judge.get("model", "?")), others)
        if judge
        else "?",
        "started": str(doc.get("started_at") or "")[:19].replace("T", " "),
        "cost": "unknown",
    }
