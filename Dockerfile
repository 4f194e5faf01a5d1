# syntax=docker/dockerfile:1
# queue-age-scaler: the virtual environment is built in one stage and copied into a slim
# runtime stage that has no compiler, no build tools and no root user.
# scripts/image builds it without a Docker daemon (buildah) and smoke-tests it (podman). With Docker,
# tag and label it with the version in scaler/__init__.py, the project's one version number:
#   version=$(python3 -c 'import scaler; print(scaler.__version__)')
#   docker build --build-arg VERSION="$version" -t "queue-age-scaler:$version" .
#   docker run --rm -p 6000:6000 -p 8080:8080 "queue-age-scaler:$version" --log-format=json
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
RUN python -m venv /opt/queue-age-scaler
# Every dependency pinned by constraints.txt, the file scripts/bootstrap installs the tests with.
COPY pyproject.toml README.md constraints.txt ./
COPY brokers/ brokers/
COPY scaler/ scaler/
# pip compiles the bytecode here, so the read-only root filesystem at run time needs no writes;
# pip and the setuptools that venv adds (10 MB) are not needed at run time
RUN /opt/queue-age-scaler/bin/pip install --constraint constraints.txt . \
    && /opt/queue-age-scaler/bin/pip uninstall --yes pip setuptools

FROM ${PYTHON_IMAGE}
ARG VERSION
LABEL org.opencontainers.image.title="queue-age-scaler" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.description="KEDA external scaler: job workers from the age of the oldest job, the time to drain, and dependency ceilings" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/queue-age-scaler/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
RUN groupadd --system --gid 10001 scaler \
    && useradd --system --uid 10001 --gid scaler --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin scaler
COPY --from=build /opt/queue-age-scaler /opt/queue-age-scaler
USER 10001:10001
# gRPC for KEDA, and Prometheus /metrics
EXPOSE 6000 8080
ENTRYPOINT ["queue-age-scaler", "serve"]
