# syntax=docker/dockerfile:1
#
# The MCP State Sidecar as a container image: one static binary (pure Go,
# SQLite included, CGO_ENABLED=0) on distroless/static, running as the
# non-root user 65532, with /data as the volume for the SQLite file.
#
#   docker build -t state-sidecar .
#   docker run --rm -p 127.0.0.1:8000:8000 -v state-data:/data \
#     -e SIDECAR_AUTH_TOKENS=change-me state-sidecar
#
# The image listens on 0.0.0.0:8000, so protected mode makes it refuse to
# start without SIDECAR_AUTH_TOKENS (or SIDECAR_ALLOW_INSECURE=true); the
# error says so. deploy/compose.yaml and deploy/k8s/ run it next to Redis,
# PostgreSQL or an agent. `state-sidecar -h` lists every setting.

ARG GO_VERSION=1.26

# ---- build: the same command as `go install ./cmd/state-sidecar`, static ----
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG TARGETOS TARGETARCH
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} GOWORK=off go build -trimpath -ldflags="-s -w" -o /out/state-sidecar ./cmd/state-sidecar
# The volume's mount point, owned by the non-root user so that a fresh named
# volume is writable.
RUN mkdir -p /out/data

# ---- run: distroless/static has CA certificates (rediss://, sslmode=require,
# OTLP over TLS), tzdata and an /etc/passwd entry for nonroot (65532), no shell ----
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/state-sidecar /usr/local/bin/state-sidecar
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
ENV DB_PATH=/data/state.db \
    SIDECAR_HOST=0.0.0.0 \
    SIDECAR_PORT=8000 \
    SIDECAR_LOG_FORMAT=json
VOLUME ["/data"]
EXPOSE 8000
# No curl in the image: the binary asks its own /readyz.
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 \
    CMD ["/usr/local/bin/state-sidecar", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/state-sidecar"]
