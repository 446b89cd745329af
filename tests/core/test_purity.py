"""The pure core imports no Celery, Redis or SDK; importing builds nothing; the public API
stays complete."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import judgeq
import judgeq.producer
import judgeq.producer.cli
import judgeq.workers

FORBIDDEN = ("celery", "kombu", "redis", "anthropic", "openai", "httpx2", "flower")
EDGE = {  # Redis and the SDK: edges
    "judgeq.store.redis",
    "judgeq.redis_connect",
    "judgeq.store.redis_cache",
    "judgeq.ratelimit.redis",
    "judgeq.judges.anthropic",
    "judgeq.judges.openai",
}
CORE_PACKAGES = (
    "judgeq.jobs",
    "judgeq.rubric",
    "judgeq.grading",
    "judgeq.judges",
    "judgeq.ratelimit",
    "judgeq.store",
    "judgeq.pipeline",
    "judgeq.report",
)


def core_modules() -> list[str]:
    names = [f"judgeq.{m.name}" for m in pkgutil.iter_modules(judgeq.__path__) if not m.ispkg]
    for pkg in CORE_PACKAGES:
        module = __import__(pkg, fromlist=["_"])
        names += [pkg, *(f"{pkg}.{m.name}" for m in pkgutil.iter_modules(module.__path__))]
    return sorted(n for n in names if n not in EDGE and n != "judgeq.__main__")  # __main__ runs the CLI


def run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_every_core_module_imports_no_edge_library() -> None:
    modules = core_modules()
    assert (
        "judgeq.grading.verdict" in modules
        and "judgeq.pipeline.stages" in modules
        and "judgeq.pipeline.timing" in modules
    )
    assert "judgeq.ratelimit.policy" in modules and "judgeq.ratelimit.memory" in modules
    code = (
        f"import sys, importlib\nfor m in {modules!r}: importlib.import_module(m)\n"
        f"print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})))"
    )
    assert run(code) == ""


def all_edge_modules() -> list[str]:
    out = ["judgeq.store.redis", "judgeq.workers", "judgeq.producer", "judgeq.producer.cli"]
    for pkg in (judgeq.workers, judgeq.producer, judgeq.producer.cli):
        out += [f"{pkg.__name__}.{m.name}" for m in pkgutil.iter_modules(pkg.__path__)]
    return sorted(set(out))


def test_importing_any_module_builds_no_celery_app_and_reads_no_argv() -> None:
    modules = all_edge_modules()
    assert "judgeq.workers.tasks" in modules and "judgeq.producer.cli.flower" in modules
    # an argv that once made an import refuse to start (a run id named 'flower')
    code = (
        "import sys, importlib\nsys.argv = ['judgeq', 'status', 'flower', '--auth_provider=x']\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "from celery import _state\n"
        "print(len(list(_state._get_active_apps())), sys.argv)"
    )
    assert run(code) == "0 ['judgeq', 'status', 'flower', '--auth_provider=x']"


def test_the_app_of_celery_dash_a_is_built_on_first_access_only() -> None:
    code = (
        "from celery import _state\nimport judgeq.workers as w\n"
        "before = len(list(_state._get_active_apps()))\n"
        "app = w.app\nassert app is w.app\n"
        "tasks = sorted(t for t in app.tasks if t.startswith('judgeq'))\n"
        "print(before, len(list(_state._get_active_apps())), tasks)"
    )
    assert run(code) == "0 1 ['judgeq.grade', 'judgeq.reduce']"


def test_the_producer_needs_no_worker_package() -> None:
    code = (
        "import sys\nimport judgeq.store.redis, judgeq.pipeline.timing, judgeq.producer.plan\n"
        "import judgeq.producer.progress, judgeq.producer.enqueue, judgeq.producer.embedded\n"
        "print([m for m in sys.modules if m.startswith('judgeq.workers')])"
    )
    assert run(code) == "[]"


def test_all_is_sorted_and_complete() -> None:
    # order: ruff's RUF022 (isort style); here: no duplicates, nothing missing, nothing extra
    assert len(judgeq.__all__) == len(set(judgeq.__all__))
    public = {
        name
        for name, value in vars(judgeq).items()
        if not name.startswith("_") and not isinstance(value, type(judgeq))
    }
    lazy = {"grade", "submit", "wait"}  # the producer's API, imported on first access
    assert public == set(judgeq.__all__) - lazy
    assert all(callable(getattr(judgeq, name)) for name in lazy)
