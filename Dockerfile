# judgeq: one image for the worker, Flower and the producer services of docker-compose.yml.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY pyproject.toml README.md ./
COPY judgeq ./judgeq
COPY workers ./workers
COPY producer ./producer
COPY rubrics ./rubrics
COPY examples ./examples
RUN pip install . \
 && useradd --create-home --uid 10001 judgeq \
 && mkdir -p /app/results \
 && chown judgeq /app/results

USER judgeq
ENV JUDGEQ_RESULTS_DIR=/app/results
CMD ["judgeq", "--help"]
