# syntax=docker/dockerfile:1
# For people with Docker (make docker). `make image` builds the same image without
# a Docker engine (internal/support/image, go-containerregistry) and is what make test
# checks; internal/support/image's test also checks that this file agrees with it: user,
# entrypoint, command, environment, ports, volume, working directory and labels.
#
# Multi-stage build: a static binary (CGO_ENABLED=0; modernc.org/sqlite is pure
# Go) on a distroless non-root base. The container runs with a read-only root
# filesystem; mount a volume at /data for the SQLite file.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/portal ./cmd/portal

FROM gcr.io/distroless/static-debian12:nonroot
# docker build --build-arg VERSION=$(git describe --tags --always --dirty) \
#   --build-arg REVISION=$(git rev-parse HEAD) \
#   --build-arg CREATED=$(date -u -d @$(git log -1 --format=%ct) +%Y-%m-%dT%H:%M:%SZ) .
ARG VERSION=dev
ARG REVISION=unknown
ARG CREATED=1970-01-01T00:00:00Z
LABEL org.opencontainers.image.title="hyperpod-portal" \
      org.opencontainers.image.source="https://github.com/hyperpod-governance/portal" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}"
COPY --from=build --chmod=0555 /out/portal /portal
USER 65532:65532
WORKDIR /
VOLUME ["/data"]
ENV PORTAL_DB=/data/portal.db PORTAL_LISTEN=0.0.0.0:8080
EXPOSE 8080
ENTRYPOINT ["/portal"]
CMD ["serve"]
