# ebb's image for machines with a Docker engine: the `ebb` CLI and the five services (`python -m ebb_<service>`), as
# deploy/kubernetes/ and docker-compose.yml (profile "system") run them. The layout is that of the image
# deploy/image/build.sh builds without an engine (docs/deploy.md, "The image"): Debian bookworm's /usr/bin/python3.11,
# the workspace in /app/.venv, uid/gid 65532, working directory /app. Unlike that one, this build is neither
# pinned nor reproducible (the base image's and apt's versions of the day).
# Build: docker build -t ghcr.io/ebb-sh/ebb:0.1.0 .
FROM debian:bookworm-slim AS build
RUN apt-get update && apt-get install -y --no-install-recommends python3.11 ca-certificates libstdc++6 \
    && rm -rf /var/lib/apt/lists/*
COPY --from=ghcr.io/astral-sh/uv:0.13.9 /uv /usr/local/bin/uv
ENV UV_PYTHON_DOWNLOADS=never \
    UV_PYTHON=/usr/bin/python3.11 \
    UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy
WORKDIR /app
# the locked dependencies first (a layer that changes only with uv.lock), then the workspace itself
COPY pyproject.toml uv.lock ./
COPY libs/ebb/pyproject.toml libs/ebb/pyproject.toml
COPY services services
COPY apps apps
COPY libs libs
RUN uv sync --frozen --no-dev --no-editable

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends python3.11 ca-certificates libstdc++6 \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /app/.venv /app/.venv
ENV PATH=/app/.venv/bin:$PATH \
    LANG=C.UTF-8 \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /app
USER 65532:65532
CMD ["ebb", "--help"]
