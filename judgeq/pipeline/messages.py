"""The messages between the producer and the workers: task names and their arguments.

Both sides import this (the producer publishes, the workers register and re-send), so neither
imports the other's code to agree on a name. A message carries ids, never a secret nor a job's
text (the store holds the jobs):

* :data:`GRADE_TASK` — ``[run_id, [index, ...], [job_id, ...]]``: grade these jobs of the run
  (the ids are for people reading Flower; the indices are what counts);
* :data:`REDUCE_TASK` — ``[run_id]``: aggregate the run's results into its report.
"""

from __future__ import annotations

__all__ = ["GRADE_TASK", "REDUCE_TASK"]

GRADE_TASK = "judgeq.grade"
REDUCE_TASK = "judgeq.reduce"
