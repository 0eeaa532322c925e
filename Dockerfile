# syntax=docker/dockerfile:1
# kube-cache-gateway: a read-only HTTP gateway serving Kubernetes resources from informer caches.
#
#   docker build -t kube-cache-gateway:0.1.0 .
#
# Stage 1 builds the wheels (the project's and every dependency's, with a compiler at hand);
# stage 2 installs them into a slim runtime with no compiler, no tests and no build tools.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
RUN pip install --no-cache-dir --upgrade pip wheel
COPY pyproject.toml README.md LICENSE constraints.txt ./
COPY app ./app
COPY informer_core ./informer_core
# control_plane (the local API server, the binaries' and the image's builds, the test
# plugin) stays out: a checkout's tools, never imported by a serving gateway
# the dependencies at the versions the suite passed with (constraints.txt)
RUN pip wheel --no-cache-dir --wheel-dir /wheels -c constraints.txt .

FROM ${PYTHON_IMAGE} AS runtime
# The wheels are mounted for the install only, so no layer of this image holds them. The
# kubernetes client carries an asyncio twin of its generated client (kubernetes.aio, 68 MB)
# and, for it alone, aiohttp and its eight dependencies (13 MB): nothing the gateway runs
# imports them (the suite imports every module in the image to hold that), so they go in
# the install's own step and no layer holds them (the build fails if kubernetes.aio moves).
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links=/wheels kube-cache-gateway \
    && python3 -c "import importlib.util as u, pathlib as p, shutil; shutil.rmtree(\
p.Path(u.find_spec('kubernetes').origin).parent / 'aio')" \
    && pip uninstall --yes --quiet aiohttp aiohttp-retry aiohappyeyeballs aiosignal attrs \
       frozenlist multidict propcache yarl \
    && groupadd --gid 65532 gateway \
    && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin gateway
# after the install: a new revision changes the labels, not the installed layer
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="kube-cache-gateway" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.description="A read-only HTTP gateway serving Kubernetes resources from informer caches" \
      org.opencontainers.image.source="https://github.com/kube-cache-gateway/kube-cache-gateway" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
# Nothing is written outside /tmp: no bytecode next to the code, no buffered logs.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    KCG_HOST=0.0.0.0 \
    KCG_PORT=8080 \
    KCG_AUTHZ=kubernetes \
    KCG_LOG_JSON=true
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["kube-cache-gateway", "serve"]
