# The container image of watcher: a static binary on distroless.
#   docker build -t ghcr.io/watcher-dev/watcher:latest .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd cmd
COPY internal internal
RUN CGO_ENABLED=0 go build -trimpath -ldflags=-s -o /watcher ./cmd/watcher

FROM gcr.io/distroless/static:nonroot
COPY --from=build /watcher /watcher
USER 65532:65532
ENTRYPOINT ["/watcher"]
