# The container image of watcher: a static binary (CGO off) on distroless's
# static base, as the non-root user 65532. Multi-platform with buildx:
#   docker build -t ghcr.io/watcher-dev/watcher:latest .
#   docker buildx build --platform linux/amd64,linux/arm64 -t ghcr.io/watcher-dev/watcher:latest .
# Without a container daemon, `make image` (hack/image.sh) builds the same
# layout of files on an empty base with go-containerregistry.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS=linux TARGETARCH=amd64
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY api api
COPY cmd cmd
COPY internal internal
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags=-s -o /watcher ./cmd/watcher

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /watcher /watcher
USER 65532:65532
ENTRYPOINT ["/watcher"]
