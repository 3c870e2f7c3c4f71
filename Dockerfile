# ebb's image: the `ebb` CLI and the five services (`python -m ebb_<service>`), as deploy/kubernetes/ and
# docker-compose.yml (profile "system") run them. Build: docker build -t ghcr.io/ebb-sh/ebb:0.1.0 .
FROM python:3.11-slim

ENV UV_PYTHON_DOWNLOADS=never \
    UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1

RUN pip install --no-cache-dir "uv>=0.5"
WORKDIR /app
# the locked dependencies first (a layer that changes only with uv.lock), then the workspace itself
COPY pyproject.toml uv.lock ./
COPY libs/ebb/pyproject.toml libs/ebb/pyproject.toml
COPY services services
COPY apps apps
COPY libs libs
RUN uv sync --frozen --no-dev --no-editable && rm -rf /root/.cache

ENV PATH=/app/.venv/bin:$PATH
USER 65532:65532
CMD ["ebb", "--help"]
