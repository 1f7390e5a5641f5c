# syntax=docker/dockerfile:1
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
COPY --from=build /out/portal /portal
USER 65532:65532
VOLUME ["/data"]
ENV PORTAL_DB=/data/portal.db PORTAL_LISTEN=0.0.0.0:8080
EXPOSE 8080
ENTRYPOINT ["/portal"]
CMD ["serve"]
