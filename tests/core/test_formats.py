"""The verdict's format fallback, written once for every provider (:class:`judgeq.judges.base.Formats`):
a server's refusal of the format in use moves the judge to the next, once; any other error, and a
refusal of the last format, is the job's own (its null)."""

from __future__ import annotations

import logging
import threading

import pytest

from judgeq.errors import JudgeAPIError, JudgeInvalidRequest, JudgeModelNotFound, JudgeRateLimited
from judgeq.judges.base import Formats


def formats() -> Formats:
    return Formats(("json_schema", "json_object", "text"), ("response_format", "JSON mode"))


def test_a_refusal_naming_the_format_moves_to_the_next_and_stays() -> None:
    f = formats()
    assert f.current == "json_schema"
    assert f.fall_back("json_schema", JudgeInvalidRequest("400: 'response_format' is not supported"))
    assert f.current == "json_object"
    assert f.fall_back("json_object", JudgeInvalidRequest("json mode is not enabled for models/x"))
    assert f.current == "text"


def test_the_last_format_has_no_fallback_and_other_errors_are_not_refusals() -> None:
    f = formats()
    assert not f.fall_back("json_schema", JudgeInvalidRequest("max_tokens: too large"))
    assert not f.fall_back("json_schema", JudgeAPIError("response_format server error"))
    assert not f.fall_back("json_schema", JudgeRateLimited("response_format", retry_after=1))
    assert f.current == "json_schema"
    f.fall_back("json_schema", JudgeInvalidRequest("response_format"))
    f.fall_back("json_object", JudgeInvalidRequest("response_format"))
    assert not f.fall_back("text", JudgeInvalidRequest("response_format"))
    assert f.current == "text"


def test_racing_callers_never_move_it_back() -> None:
    """Threads refused in the first format after another has moved on to the third: the
    furthest move holds (a stale refusal does not return the judge to the second)."""
    f = formats()
    f.fall_back("json_schema", JudgeInvalidRequest("response_format"))
    f.fall_back("json_object", JudgeInvalidRequest("response_format"))
    threads = [
        threading.Thread(target=f.fall_back, args=("json_schema", JudgeInvalidRequest("response_format")))
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert f.current == "text"


def test_a_missing_model_is_no_refusal_of_the_format() -> None:
    f = formats()
    assert not f.fall_back("json_schema", JudgeModelNotFound("404: response_format model gone"))
    assert f.current == "json_schema"


def test_a_complaint_about_the_schema_is_the_job_s_null_not_a_refusal_of_structured_output() -> None:
    """Anthropic's and Gemini's words name the refusal, not the field: a schema the server
    finds fault with (a property it does not support) must not move every later call of the
    process to free text."""
    from judgeq.judges.anthropic import FORMAT_WORDS as ANTHROPIC
    from judgeq.judges.base import Formats
    from judgeq.judges.gemini import FORMAT_WORDS as GEMINI

    claude = Formats(("json_schema", "text"), ANTHROPIC)
    schema = (
        "output_config.format.schema.properties.x: property 'minimum' is not supported in structured outputs"
    )
    assert not claude.fall_back("json_schema", JudgeInvalidRequest(schema))
    assert claude.fall_back(
        "json_schema", JudgeInvalidRequest("output_config: Extra inputs are not permitted")
    )
    gemini = Formats(("json_schema", "text"), GEMINI)
    assert not gemini.fall_back(
        "json_schema", JudgeInvalidRequest("generationConfig.responseJsonSchema: bad")
    )
    assert gemini.fall_back(
        "json_schema", JudgeInvalidRequest("JSON mode is not enabled for models/gemini-pro")
    )


def test_the_move_is_said_once_in_the_log(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="judgeq.judge")
    f = Formats(("json_schema", "text"), ("response_format",), "openai judge")
    for _ in range(3):
        f.fall_back("json_schema", JudgeInvalidRequest("400: response_format is not supported"))
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and "openai judge" in said[0] and "as text from now on" in said[0]
