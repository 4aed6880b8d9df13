# syntax=docker/dockerfile:1
#
# a2m-gateway container image.
#
#   docker build -t a2m-gateway:0.1.0 .
#   docker run --rm -p 8080:8080 --read-only --tmpfs /tmp \
#     -v "$PWD/config.yaml:/etc/a2m-gateway/config.yaml:ro" a2m-gateway:0.1.0
#
# Stage 1 builds wheels for the gateway and every dependency; stage 2 installs
# only those wheels (no index, no compiler) and runs as uid 10001. The image
# works with a read-only root filesystem: it writes only to /tmp and to the
# Qdrant local-mode path when one is configured (both volumes in the chart).
# Pin PYTHON_IMAGE by digest in your own builds for reproducibility.

ARG PYTHON_IMAGE=python:3.11-slim
# Extras baked in: "aws" brings boto3 for OpenSearch SigV4 (IRSA). Add
# "local-embeddings" for in-process query embedding (much larger image).
ARG EXTRAS=aws

FROM ${PYTHON_IMAGE} AS build
ARG EXTRAS
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# .dockerignore lets through only what the wheel is built from.
COPY . .
RUN pip wheel --wheel-dir /wheels ".[${EXTRAS}]"

FROM ${PYTHON_IMAGE}
ARG EXTRAS
LABEL org.opencontainers.image.title="a2m-gateway" \
      org.opencontainers.image.description="A2M JSON-RPC gateway in front of Elasticsearch, OpenSearch and Qdrant" \
      org.opencontainers.image.licenses="MIT"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN groupadd --system --gid 10001 a2m \
    && useradd --system --uid 10001 --gid 10001 --no-create-home \
       --home-dir /nonexistent --shell /usr/sbin/nologin a2m \
    && mkdir -p /etc/a2m-gateway/secrets /var/lib/a2m-gateway \
    && chown 10001:10001 /var/lib/a2m-gateway
# The wheels are bind-mounted, not copied, so they add no layer. pip
# precompiles bytecode here, since the root filesystem is read-only at run time.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-index --find-links=/wheels "a2m-gateway[${EXTRAS}]"

USER 10001:10001
WORKDIR /tmp
EXPOSE 8080
ENTRYPOINT ["a2m-gateway"]
CMD ["serve", "--config", "/etc/a2m-gateway/config.yaml", "--host", "0.0.0.0", "--port", "8080"]
