# The operator image: the manager (/operator), the chart's seccomp profile
# installer (/seccomp-installer) and the backup agent RedisBackup Jobs run
# (/uring-backup), static binaries on a minimal base, non-root.
#
# Both bases are build arguments so the image also builds offline from local
# images (e2e/images/build.sh passes its Go builder and debian:trixie-slim).
# The Go module and build caches are BuildKit cache mounts (Docker >= 23 builds
# with BuildKit; buildah supports them too): a source change recompiles only
# what changed, and the bench image reuses what this build compiled. The build
# stage runs on the builder's platform and cross-compiles for the target's
# (TARGETARCH), so an arm64 image needs no Go under emulation.
ARG GO_IMAGE=golang:1.26-bookworm
ARG BUILDER_IMAGE=${GO_IMAGE}
ARG BASE_IMAGE=gcr.io/distroless/static-debian12:nonroot

FROM --platform=${BUILDPLATFORM} ${BUILDER_IMAGE} AS build
ARG GOPROXY
ARG TARGETARCH
WORKDIR /src
COPY go.mod go.sum ./
COPY api/ api/
COPY cmd/ cmd/
COPY controllers/ controllers/
COPY internal/ internal/
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=linux GOARCH=${TARGETARCH} go build -trimpath -ldflags "-s -w" -o /out/ ./cmd/operator ./cmd/seccomp-installer ./cmd/uring-backup

FROM ${BASE_IMAGE}
COPY --from=build /out/operator /out/seccomp-installer /out/uring-backup /
USER 65532:65532
ENTRYPOINT ["/operator"]
