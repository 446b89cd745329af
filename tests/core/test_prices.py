"""Issue 18.6, prices: a model id is priced exactly or by the alias table, never by a prefix of
another family; ``JUDGEQ_PRICES`` (``--prices``) adds and overrides prices and is validated; a
run records its judges' prices, so the workers price it without the user's file, and a cost
that has no price is shown as unknown; ``--max-cost`` with a judge that has no price is refused
(submit, run, resume) before anything is enqueued."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import fakeredis
import pytest
from click.testing import CliRunner

from judgeq import ConfigError, Result
from judgeq.judges.prices import Prices, load_prices, shipped_prices
from judgeq.producer.plan import make_plan
from judgeq.report.markdown import render_markdown
from judgeq.runspec import RunSpec
from judgeq.settings import load_settings
from judgeq.store.base import MemoryStore, Store
from judgeq.store.redis import RedisStore

ROOT = Path(__file__).parent.parent.parent
RESPONSES = ROOT / "examples" / "responses.jsonl"
NO_PRICE = (
    "no price for model 'claude-test': add it to a prices file given with JUDGEQ_PRICES=path "
    "(format of judgeq/data/prices.json), or leave out --max-cost"
)


def write(path: Path, data: Any) -> Path:
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


# -- lookup ------------------------------------------------------------------------------------


def test_an_id_is_priced_by_its_own_entry_or_its_alias_and_never_by_a_prefix() -> None:
    prices = shipped_prices()
    sonnet45 = prices.entries["claude-sonnet-4-5"]
    assert prices.lookup("claude-sonnet-4-5") is sonnet45
    assert prices.lookup("claude-sonnet-4-5-20250929") is sonnet45  # a documented alias
    assert prices.lookup("claude-3-7-sonnet-latest") is prices.entries["claude-3-7-sonnet"]
    # newer or unlisted ids of a family take no older family's price (the old prefix match
    # priced claude-sonnet-4-6 as claude-sonnet-4 and claude-opus-4-7 as claude-opus-4)
    for model in (
        "claude-sonnet-4-6",
        "claude-opus-4-7",
        "claude-sonnet-4-5-20991231",
        "claude-haiku-4-5-latest",
        "claude-sonnet-4-",
        "claude",
        "claude-sonnet-4-5 ",
    ):
        assert prices.lookup(model) is None, model
    assert prices.cost("claude-sonnet-4-6", 1000, 1000) is None, "unknown, not $0"
    # every alias points at an entry, and no entry hides behind a prefix of another
    assert all(target in prices.entries for target in prices.aliases.values())
    # an OpenAI-compatible judge (MODEL@URL): its own entry, else its model's (issue 29: a
    # gateway serving claude-sonnet-4-5 had no price unless it was listed under MODEL@URL)
    assert prices.lookup("claude-sonnet-4-5@http://gw.local:4000/v1") is sonnet45
    assert prices.lookup("claude-sonnet-4-5-20250929@https://gw/v1") is sonnet45
    assert prices.lookup("my-qwen@http://gpu-1:8000/v1") is None
    assert prices.lookup("claude-sonnet-4-5@not-a-url") is None
    own = Prices({**prices.entries, "claude-sonnet-4-5@http://gw/v1": prices.entries["claude-haiku-4-5"]})
    assert own.lookup("claude-sonnet-4-5@http://gw/v1") is prices.entries["claude-haiku-4-5"]


def test_missing_cache_prices_follow_the_apis_rules() -> None:
    p = load_prices(None).entries["claude-opus-4-5"]
    assert (p.cache_write, p.cache_read) == (6.25, 0.5)


# -- the user's file -----------------------------------------------------------------------------


def test_a_users_file_adds_and_overrides_prices_and_aliases(tmp_path: Path) -> None:
    path = write(
        tmp_path / "prices.json",
        {
            "_taken": "2027-01-10",
            "_note": "keys starting with _ are notes",
            "_aliases": {"claude-sonnet-4-6-20270101": "claude-sonnet-4-6"},
            "claude-sonnet-4-6": {"input": 4.0, "output": 20.0},
            "claude-sonnet-4-5": {"input": 2.0, "output": 10.0, "batch_discount": 0.25},
        },
    )
    prices = load_prices(path)
    new = prices.lookup("claude-sonnet-4-6-20270101")
    assert new is not None and (new.input, new.output) == (4.0, 20.0)
    assert (new.cache_write, new.cache_read, new.batch_discount) == (5.0, 0.4, 0.5)  # the API's rules
    over = prices.lookup("claude-sonnet-4-5-20250929")  # the shipped alias now finds the override
    assert over is not None and (over.input, over.batch_discount) == (2.0, 0.25)
    assert prices.lookup("claude-haiku-4-5") == shipped_prices().lookup("claude-haiku-4-5")
    assert prices.cost("claude-sonnet-4-6", 1_000_000, 1_000_000) == {
        "input": 4.0,
        "output": 20.0,
        "cache_read": 0.0,
        "cache_write": 0.0,
        "batch_discount": 0.0,
        "total": 24.0,
    }
    assert prices.taken == f"{shipped_prices().taken}, with {path} of 2027-01-10"
    assert shipped_prices().lookup("claude-sonnet-4-6") is None, "the shipped table is untouched"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object of model id -> prices"),
        ({"m": {"input": -1, "output": 2}}, "m.input: Input should be greater than or equal to 0"),
        ({"m": {"input": 1}}, "m.output: Field required"),
        ({"m": {"input": 1, "ouput": 2, "output": 2}}, "m.ouput: Extra inputs are not permitted"),
        ({"m": {"input": "3", "output": 2}}, "m.input: Input should be a valid number"),
        ({"m": {"input": 1, "output": 2, "batch_discount": 2}}, "m.batch_discount: Input should be less"),
        ({"m": {"input": 1, "output": 2, "min_cache_tokens": 1.5}}, "m.min_cache_tokens: Input should be"),
        ({"m": 3}, "m: Input should be a valid dictionary"),
        ('{"m": {"input": NaN, "output": 1}}', "m.input: Input should be a finite number"),
        ({"_aliases": {"x": "no-such-model"}}, "_aliases.x: 'no-such-model' has no prices entry"),
        ({"_aliases": ["x"]}, "_aliases: Input should be a valid dictionary"),
        ({"": {"input": 1, "output": 1}}, "a model id is empty"),
    ],
)
def test_a_bad_prices_file_is_one_line_naming_the_file_and_the_field(
    tmp_path: Path, content: Any, expected: str
) -> None:
    path = write(tmp_path / "mine.json", content)
    with pytest.raises(ConfigError) as err:
        load_prices(path)
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"prices file {path}: ")
    assert expected in text


def test_a_prices_file_that_cannot_be_read(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"prices file .*nope\.json \(JUDGEQ_PRICES / --prices\): cannot"):
        load_prices(tmp_path / "nope.json")


def test_the_setting_reads_judgeq_prices(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("JUDGEQ_PRICES", str(tmp_path / "p.json"))
    assert load_settings().prices == tmp_path / "p.json"
    from judgeq.settings import known_variables

    assert "JUDGEQ_PRICES" in known_variables()


# -- a run records its prices ----------------------------------------------------------------------


def plan(tmp_path: Path, *judges: str, **settings: Any) -> Any:
    return make_plan(
        jobs_path=RESPONSES,
        jobs_name="responses.jsonl",
        rubric_ref="quality",
        settings=load_settings(**settings),
        judge=judges,
    )


def graded(i: int, model: str, **kw: Any) -> Result:
    base: dict[str, Any] = {
        "job_id": f"j{i}",
        "index": i,
        "status": "graded",
        "overall": 7.0,
        "input_tokens": 1_000_000,
        "output_tokens": 0,
        "rubric_name": "quality",
        "rubric_version": "1.0.0",
        "judge_model": model,
    }
    return Result(**{**base, **kw})


@pytest.mark.parametrize("kind", ["memory", "redis"])
def test_workers_price_a_run_with_the_prices_its_producer_recorded(tmp_path: Path, kind: str) -> None:
    path = write(tmp_path / "p.json", {"claude-test": {"input": 7.0, "output": 0.0}})
    p = plan(tmp_path, "anthropic:claude-test", "anthropic:claude-haiku-4-5", prices=path)
    spec: RunSpec = p.spec
    assert set(spec.prices or {}) == {"claude-test", "claude-haiku-4-5"}  # a council: every judge
    assert spec.prices["claude-test"].input == 7.0  # type: ignore[index]
    path.unlink()  # the workers never see the user's file
    store: Store = (
        MemoryStore() if kind == "memory" else RedisStore(fakeredis.FakeRedis(decode_responses=True))
    )
    store.register(RunSpec.model_validate_json(spec.model_dump_json()))
    store.store_result(spec.run_id, graded(0, "claude-test"))
    assert store.counters(spec.run_id)["cost_usd"] == pytest.approx(7.0)
    usage = {"claude-test": [1_000_000, 0, 0, 0], "claude-haiku-4-5": [1_000_000, 0, 0, 0]}
    store.store_result(spec.run_id, graded(1, "claude-test", input_tokens=2_000_000, judge_usage=usage))
    assert store.counters(spec.run_id)["cost_usd"] == pytest.approx(7.0 + 7.0 + 1.0)


def test_a_report_of_a_judge_without_a_price_says_unknown(tmp_path: Path) -> None:
    from judgeq.pipeline.stages import reduce_run

    spec = plan(tmp_path, "anthropic:claude-test").spec
    assert spec.prices == {} and spec.unpriced_models() == ["claude-test"]
    store = MemoryStore()
    store.register(spec)
    store.set_state(spec.run_id, state="running")
    for i in range(spec.total):
        store.store_result(spec.run_id, graded(i, "claude-test", input_tokens=1000))
    assert store.counters(spec.run_id).get("cost_usd", 0.0) == 0.0
    report = reduce_run(store, spec.run_id)
    use = report["usage"]
    assert use["estimated_cost_usd"] is None and use["cost_usd"] is None
    assert use["unpriced_models"] == ["claude-test"]
    md = render_markdown(report)
    assert "estimated cost unknown (no price for 'claude-test'" in md and "$0.0000" not in md
    from judgeq.producer.progress import snapshot, summary_text

    line = summary_text(report)
    assert "est. cost unknown (no price for 'claude-test'" in line and "None" not in line
    snap = snapshot(store, spec.run_id)
    assert snap is not None and snap.unpriced == ("claude-test",)


def test_a_lexical_run_needs_no_price(tmp_path: Path) -> None:
    spec = plan(tmp_path, "lexical", max_cost=1.0).spec
    assert spec.unpriced_models() == []


# -- the refusal -----------------------------------------------------------------------------------


def test_a_cost_limit_with_a_judge_without_a_price_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        plan(tmp_path, "anthropic:claude-test", max_cost=1.0)
    assert str(err.value) == NO_PRICE
    # a council: the judge without a price is named, whichever it is
    with pytest.raises(ConfigError, match="no price for model 'claude-sonnet-4-6'"):
        plan(tmp_path, "anthropic:claude-haiku-4-5", "anthropic:claude-sonnet-4-6", max_cost=1.0)
    # a price from the user's file lifts it
    path = write(tmp_path / "p.json", {"claude-test": {"input": 1.0, "output": 5.0}})
    assert plan(tmp_path, "anthropic:claude-test", max_cost=1.0, prices=path).spec.prices


# -- the command line ------------------------------------------------------------------------------


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "JUDGEQ_"))}
    return {**env, **extra}


def judgeq(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "judgeq", *args],
        capture_output=True,
        text=True,
        env=clean_env(**env),
        timeout=120,
    )


def one_error_line(proc: subprocess.CompletedProcess[str] | Any) -> str:
    """The one error line of a refused command (exit 2), and nothing else on stderr."""
    cli = isinstance(proc, subprocess.CompletedProcess)
    assert (proc.returncode if cli else proc.exit_code) == 2
    stderr = proc.stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("judgeq: error: "), stderr
    assert "Traceback" not in stderr
    return lines[0].removeprefix("judgeq: error: ")


def test_a_bad_prices_file_stops_judgeq_run_with_one_line(tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["run", str(RESPONSES), "--rubric", "quality", "--judge", "anthropic:claude-test"]
    bad = write(tmp_path / "bad.json", {"claude-test": {"input": 1.0, "output": -2}})
    proc = judgeq(*args, "--out", str(out), JUDGEQ_PRICES=str(bad))
    assert one_error_line(proc) == (
        f"prices file {bad}: claude-test.output: Input should be greater than or equal to 0"
    )
    proc = judgeq(*args, "--prices", str(tmp_path / "missing.json"), "--out", str(out))
    assert "missing.json (JUDGEQ_PRICES / --prices): cannot be read" in one_error_line(proc)
    assert not out.exists(), "nothing graded, nothing written"


def test_the_dry_run_prices_with_the_users_file(tmp_path: Path) -> None:
    args = ["run", str(RESPONSES), "--rubric", "quality", "--judge", "anthropic:claude-test", "--dry-run"]
    proc = judgeq(*args)
    assert proc.returncode == 0, proc.stderr
    assert "cost: unknown (no price for 'claude-test': add it to a prices file given with JUDGEQ_PRICES" in (
        proc.stdout
    )
    mine = write(tmp_path / "p.json", {"claude-test": {"input": 1.0, "output": 5.0}})
    proc = judgeq(*args, "--prices", str(mine))
    assert proc.returncode == 0, proc.stderr
    assert f"estimated cost for claude-test (prices of {shipped_prices().taken}, with {mine}):" in proc.stdout


def test_judgeq_run_refuses_a_cost_limit_it_could_not_hold_and_a_price_lifts_it(tmp_path: Path) -> None:
    from judgeq.testing.fake_anthropic import FakeMessagesAPI

    out = tmp_path / "out"
    args = ["run", str(RESPONSES), "--rubric", "quality", "--judge", "anthropic:claude-test", "-c", "1"]
    args += ["--no-cache", "--out", str(out)]
    with FakeMessagesAPI(api_key="k") as fake:
        api = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": fake.base_url}
        proc = judgeq(*args, "--max-cost", "0.01", **api)
        assert one_error_line(proc) == NO_PRICE
        assert not out.exists(), "nothing graded, nothing written"
        assert fake.request_count == 0 and fake.model_checks == 0, "refused before the preflight"
        # with a price of the user's own the limit holds: the run stops on it
        mine = write(tmp_path / "p.json", {"claude-test": {"input": 30.0, "output": 150.0}})
        proc = judgeq(*args, "--max-cost", "0.01", **api, JUDGEQ_PRICES=str(mine))
        assert proc.returncode == 3, proc.stderr
        assert re.search(r"stopped: max_cost: \$0\.\d{4} spent of the \$0\.0100 allowed", proc.stderr)
        assert "Traceback" not in proc.stderr
        assert fake.request_count == 1, "one job in hand (-c 1): the first one past the limit pauses the run"


def test_submit_refuses_it_before_anything_is_enqueued(monkeypatch: pytest.MonkeyPatch) -> None:
    from judgeq.producer.cli import main

    client = fakeredis.FakeRedis(decode_responses=True)
    monkeypatch.setattr(RedisStore, "open", classmethod(lambda cls, settings, c=None: cls(client)))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    result = CliRunner().invoke(
        main,
        [
            "submit",
            str(RESPONSES),
            "--rubric",
            "quality",
            "--judge",
            "anthropic:claude-test",
            "--max-cost",
            "1",
        ],
    )
    assert result.exit_code == 2, result.output
    assert one_error_line(result) == NO_PRICE
    assert client.keys("*") == [], "nothing registered, nothing enqueued"


def test_resume_refuses_a_cost_limit_for_a_run_without_prices(monkeypatch: pytest.MonkeyPatch) -> None:
    from judgeq.producer.cli import main

    client = fakeredis.FakeRedis(decode_responses=True)
    store = RedisStore(client)
    monkeypatch.setattr(RedisStore, "open", classmethod(lambda cls, settings, c=None: store))
    text = (ROOT / "rubrics" / "quality.md").read_text()
    store.register(
        RunSpec(
            run_id="r",
            rubric_text=text,
            rubric_source="builtin:quality",
            judge_provider="anthropic",
            judge_model="claude-test",
            prices={},
        )
    )
    store.set_state("r", state="paused", pause_reason="auth_error: 401")
    result = CliRunner().invoke(main, ["resume", "r", "--max-cost", "5"])
    line = one_error_line(result)
    assert line.startswith("run r has no price for model 'claude-test', so a cost limit cannot hold")
    assert store.state("r")["state"] == "paused" and "max_cost_usd" not in store.state("r")


def test_resume_of_a_run_paused_on_its_cost_limit_needs_a_higher_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from judgeq.producer.cli import main

    store = RedisStore(fakeredis.FakeRedis(decode_responses=True))
    monkeypatch.setattr(RedisStore, "open", classmethod(lambda cls, settings, c=None: store))
    text = (ROOT / "rubrics" / "quality.md").read_text()
    spec = RunSpec(
        run_id="r",
        rubric_text=text,
        rubric_source="builtin:quality",
        judge_provider="anthropic",
        judge_model="claude-haiku-4-5",
        lane="batch",
    )
    store.register(spec)
    # the batch lane paused before a batch that would pass the limit, with $0.40 of $0.50 spent
    reason = "max_cost: $0.4000 spent of the $0.5000 allowed; the next Message Batch ..."
    store.set_state("r", state="paused", pause_reason=reason, max_cost_usd=0.5)
    line = one_error_line(CliRunner().invoke(main, ["resume", "r"]))
    assert (
        line.startswith("run r paused on its cost limit (max_cost: $0.4000 spent")
        and "higher --max-cost" in line
    )
    assert store.state("r")["state"] == "paused"
