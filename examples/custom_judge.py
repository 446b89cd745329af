"""A custom judge: grading through an in-house HTTP service, with judgeq's retries, rate limit,
reply cache, councils and reports.

    export JUDGE_SERVICE_URL=http://grader.internal:8080/grade JUDGEQ_JUDGE_MODULES=custom_judge
    PYTHONPATH=examples judgeq run examples/responses.jsonl --rubric quality \\
        --judge python:custom_judge:make_judge

The service takes ``{"model", "system", "user", "schema", "max_tokens"}`` as JSON and answers
``{"verdict": {...}, "model": "...", "usage": {"input_tokens": N, "output_tokens": N}}``. A
judge raises judgeq's errors for failures, so each becomes the right null reason (and a
429 or 5xx is retried, honouring ``retry-after``).
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request

from judgeq import JudgeReply, JudgeRequest
from judgeq.errors import JudgeAPIError, JudgeAuthError, JudgeInvalidRequest, JudgeRateLimited, JudgeTimeout


class ServiceJudge:
    """Posts each rendered request to the service at ``url``."""

    provider = "inhouse"

    def __init__(self, url: str, model: str = "inhouse-grader-v1") -> None:
        self.url, self.model = url, model

    def complete(self, request: JudgeRequest, *, timeout: float) -> JudgeReply:
        body = json.dumps(
            {
                "model": self.model,
                "system": "\n\n".join(request.system),
                "user": request.user,
                "schema": request.output_schema,
                "max_tokens": request.max_tokens,
            }
        ).encode()
        call = urllib.request.Request(self.url, data=body, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(call, timeout=timeout) as answer:
                data = json.load(answer)
        except urllib.error.HTTPError as exc:
            retry = exc.headers.get("retry-after")
            message = f"grading service answered {exc.code}"
            if exc.code == 429:
                raise JudgeRateLimited(message, retry_after=float(retry) if retry else None) from None
            if exc.code in (401, 403):
                raise JudgeAuthError(message) from None
            if exc.code >= 500:
                raise JudgeAPIError(message) from None
            raise JudgeInvalidRequest(message) from None
        except TimeoutError:
            raise JudgeTimeout("the grading service did not answer in time") from None
        except ConnectionError as exc:  # reset or refused mid-answer (not wrapped by urllib): retried
            why = exc.strerror or exc
            raise JudgeAPIError(f"the grading service dropped the connection: {why}") from None
        except urllib.error.URLError as exc:
            raise JudgeAPIError(f"the grading service cannot be reached: {exc.reason}") from None
        usage = data.get("usage") or {}
        return JudgeReply(
            text=json.dumps(data["verdict"]),
            input_tokens=int(usage.get("input_tokens", 0)),
            output_tokens=int(usage.get("output_tokens", 0)),
            model=data.get("model", self.model),
        )


def make_judge() -> ServiceJudge:
    """The factory ``--judge python:custom_judge:make_judge`` names."""
    url = os.environ.get("JUDGE_SERVICE_URL")
    if not url:
        raise RuntimeError("set JUDGE_SERVICE_URL to the grading service's URL")
    return ServiceJudge(url)
