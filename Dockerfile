# The two dyn-gitops images, from one Dockerfile (docs/images.md):
#
#   --target cmp         ghcr.io/dyn-gitops/dyn-gitops-cmp   the Argo CD sidecar (CMP v2)
#   --target controller  ghcr.io/dyn-gitops/dyn-gitops       the companion controller (the chart's image)
#
#   docker buildx build --target cmp --build-arg VERSION=0.1.0 --build-arg REVISION=$(git rev-parse HEAD) \
#     -t <registry>/dyn-gitops-cmp:0.1.0 .
#
# Both share every layer up to the installed package; each adds only its user and entrypoint.
# Both run as non-root with a read-only root file system: Python writes no bytecode, and the
# only writable place is /tmp (an emptyDir). The last RUN of each target deletes the shells:
# nothing runs through one at run time (argocd-cmp-server execs `dyn-gitops cmp generate`
# directly, and the controller is one Python process).
#
# BASE_IMAGE: the public build uses Docker Hub's python image pinned by digest. The test suite
# and tools/release-rehearsal.sh pass a Python base assembled by mmdebstrap from Debian
# packages (tools/images/build.sh); any Debian-based image with python3 >= 3.11 and its venv works.
ARG BASE_IMAGE=docker.io/library/python:3.11-slim-bookworm@sha256:2e32f7d302adc1c37428355c1e646897c0c53f4fd60b6a551245fb90ee129f91

FROM ${BASE_IMAGE} AS build
WORKDIR /src
# Every Python dependency comes from a hashed lock file (tools/images/lock.py writes them):
# `--require-hashes` makes pip refuse any file whose sha256 is not pinned there. Downloaded
# before the sources are copied, so a source change reuses this layer. The build backend
# (setuptools) gets a venv of its own: the package's wheel is built without build isolation,
# which would fetch an unpinned one.
COPY tools/images/requirements-build.txt tools/images/requirements-cmp.txt tools/images/requirements-controller.txt /locks/
RUN --mount=type=cache,target=/root/.cache/pip \
    python3 -m venv /opt/build \
 && /opt/build/bin/python -m pip install --disable-pip-version-check --require-hashes \
      -r /locks/requirements-build.txt \
 && /opt/build/bin/python -m pip download --disable-pip-version-check --require-hashes \
      --only-binary=:all: --dest /wheels -r /locks/requirements-controller.txt
ARG VERSION
COPY pyproject.toml README.md LICENSE ./
COPY dyn_gitops ./dyn_gitops
COPY operator/dyn_gitops_operator ./operator/dyn_gitops_operator
# The version is stamped once, in dyn_gitops/__init__.py: the VERSION build-arg (image tag and
# label) must agree with it. Each image gets its own virtualenv at /opt/dyn-gitops (built at
# the path it runs from: a virtualenv does not move), without pip.
RUN python3 -c "import sys; sys.path.insert(0, '.'); import dyn_gitops as d; \
sys.exit(0 if d.__version__ == '${VERSION}' else 'build-arg VERSION=${VERSION} but the package is ' + d.__version__)" \
 && python3 -m venv /opt/dyn-gitops \
 && /opt/build/bin/python -m pip wheel --disable-pip-version-check --no-deps --no-build-isolation \
      --wheel-dir /wheels .

# Each venv: its lock file (hashes checked again, from /wheels only), then the package without
# dependencies, then `pip check` (the lock satisfies what the package requires).
FROM build AS venv-cmp
RUN /opt/dyn-gitops/bin/python -m pip install --no-cache-dir --disable-pip-version-check --no-index \
      --find-links /wheels --require-hashes -r /locks/requirements-cmp.txt \
 && /opt/dyn-gitops/bin/python -m pip install --no-cache-dir --disable-pip-version-check --no-index \
      --no-deps /wheels/dyn_gitops-*.whl \
 && /opt/dyn-gitops/bin/python -m pip check \
 && /opt/dyn-gitops/bin/python -m pip uninstall --yes --quiet pip setuptools

FROM build AS venv-controller
RUN /opt/dyn-gitops/bin/python -m pip install --no-cache-dir --disable-pip-version-check --no-index \
      --find-links /wheels --require-hashes -r /locks/requirements-controller.txt \
 && /opt/dyn-gitops/bin/python -m pip install --no-cache-dir --disable-pip-version-check --no-index \
      --no-deps /wheels/dyn_gitops-*.whl \
 && /opt/dyn-gitops/bin/python -m pip check \
 && /opt/dyn-gitops/bin/python -m pip uninstall --yes --quiet pip setuptools

# --- what both images share -----------------------------------------------------------------
FROM ${BASE_IMAGE} AS runtime
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    TMPDIR=/tmp \
    PATH=/opt/dyn-gitops/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# --- the Argo CD sidecar ----------------------------------------------------------------------
FROM runtime AS cmp
ENV HOME=/home/argocd
COPY --from=venv-cmp /opt/dyn-gitops /opt/dyn-gitops
# Argo CD's repo-server runs as 999:999 and shares the plugin socket directory with the sidecar.
# The group is created first with its own id (useradd's user-group option would pick gid 1000).
# `install-launcher` replaces the console script with a launcher that answers
# `dyn-gitops cmp generate` through the warm render server in a few milliseconds and runs the
# full CLI for everything else (docs/argocd.md, "Performance").
RUN groupadd --system --gid 999 argocd \
 && useradd --system --uid 999 --gid 999 --home-dir /home/argocd --create-home \
      --shell /usr/sbin/nologin argocd \
 && dyn-gitops cmp install-launcher /opt/dyn-gitops/bin/dyn-gitops \
 && rm -f /bin/sh /bin/bash /bin/rbash /bin/dash /usr/bin/sh /usr/bin/bash /usr/bin/rbash /usr/bin/dash
COPY plugin.yaml /home/argocd/cmp-server/config/plugin.yaml
USER 999:999
WORKDIR /home/argocd
# argocd-cmp-server (copied in by repo-server) runs under `dyn-gitops cmp init`: as PID 1 it
# would ignore the pod's SIGTERM (it removes its socket and never exits) and reap no orphans;
# the init stops the sidecar within a second (docs/images.md, "Stopping").
ENTRYPOINT ["/opt/dyn-gitops/bin/dyn-gitops", "cmp", "init", "--"]
CMD ["/var/run/argocd/argocd-cmp-server"]
ARG VERSION
ARG REVISION=unknown
LABEL org.opencontainers.image.title="dyn-gitops-cmp" \
      org.opencontainers.image.description="dyn-gitops as an Argo CD config-management plugin (CMP v2 sidecar)" \
      org.opencontainers.image.source="https://github.com/dyn-gitops/dyn-gitops" \
      org.opencontainers.image.url="https://github.com/dyn-gitops/dyn-gitops" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.vendor="dyn-gitops"

# --- the companion controller -----------------------------------------------------------------
FROM runtime AS controller
COPY --from=venv-controller /opt/dyn-gitops /opt/dyn-gitops
RUN groupadd --system --gid 65532 nonroot \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin nonroot \
 && rm -f /bin/sh /bin/bash /bin/rbash /bin/dash /usr/bin/sh /usr/bin/bash /usr/bin/rbash /usr/bin/dash
USER 65532:65532
ENTRYPOINT ["dyn-gitops-operator"]
CMD ["--help"]
ARG VERSION
ARG REVISION=unknown
LABEL org.opencontainers.image.title="dyn-gitops" \
      org.opencontainers.image.description="The dyn-gitops companion controller (dyn-gitops-operator)" \
      org.opencontainers.image.source="https://github.com/dyn-gitops/dyn-gitops" \
      org.opencontainers.image.url="https://github.com/dyn-gitops/dyn-gitops" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.vendor="dyn-gitops"
