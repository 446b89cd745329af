"""The producer side: validating and submitting batches, waiting, status, reports, and the
``judgeq`` command line (:mod:`judgeq.producer.cli`)."""

__all__: list[str] = []
