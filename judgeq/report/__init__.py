"""From results to a report: aggregation, statistics, validity, Markdown/JSON/HTML files,
compare and rescore."""

__all__: list[str] = []
