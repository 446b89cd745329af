"""Grading jobs: one line of a batch, of one of the kinds registered in
:mod:`judgeq.jobs.kinds` (each defined in its own module):

* ``response`` (:mod:`judgeq.jobs.response`) — ``id``, ``input``, ``output``; optional
  ``context``, ``expected_answer``, ``model`` (the system that produced the output) and ``metadata``;
* ``question`` (:mod:`judgeq.jobs.question`) — a retrieval result: ``id``, ``question``,
  ``expected_answer``, ``retrieved`` (list of ``doc_id``/``text``), and ``needle_doc_id`` or
  ``relevant_doc_ids``; optional ``model``, ``metadata`` and ``latency_ms`` (the retrieval latency);
* ``pair`` (:mod:`judgeq.jobs.pair`) — two outputs for one input, to compare: ``id``, ``input``,
  ``output_a``, ``output_b``; optional ``model_a``, ``model_b`` (the systems that produced them),
  ``context``, ``expected_answer`` and ``metadata``;
* ``conversation`` (:mod:`judgeq.jobs.conversation`) — an agent's ``messages`` (OpenAI chat
  format, or Anthropic's blocks), optional ``tools``, ``reference`` and ``checks``.

Any job may carry a ``label`` (a person's grade, for the report's agreement section): a
number on the rubric's scale, ``pass``/``fail``, or for pairs ``a``/``b``/``tie``.

The kind is given as ``kind`` or inferred: ``question`` or ``retrieved`` present means a
question job, ``messages`` a conversation, ``output_a`` a pair job. This module gathers the
names the rest of judgeq imports.
"""

from __future__ import annotations

from judgeq.jobs.base import LABEL_WORDS, MAX_ID_CHARS, JobId
from judgeq.jobs.conversation import ConversationJob
from judgeq.jobs.kinds import KINDS, infer_kind
from judgeq.jobs.pair import PairJob
from judgeq.jobs.question import MAX_RETRIEVED, QuestionJob
from judgeq.jobs.response import ResponseJob

__all__ = [
    "JOB_MODELS",
    "LABEL_WORDS",
    "MAX_ID_CHARS",
    "MAX_RETRIEVED",
    "ConversationJob",
    "Job",
    "JobId",
    "PairJob",
    "QuestionJob",
    "ResponseJob",
    "infer_kind",
]

Job = ResponseJob | QuestionJob | PairJob | ConversationJob

JOB_MODELS: dict[str, type[ResponseJob] | type[QuestionJob] | type[PairJob] | type[ConversationJob]] = {
    name: kind.model  # type: ignore[misc]
    for name, kind in KINDS.items()
}
"""Each kind's model, by name."""
