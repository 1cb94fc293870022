// Module image builds watcher's container image without a container daemon,
// with go-containerregistry (hack/image.sh runs it). It is separate from
// watcher's own module so that go-containerregistry stays out of watcher's
// go.mod.
module github.com/watcher-dev/watcher/hack/image

go 1.26.0

require github.com/google/go-containerregistry v0.22.1

require (
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	golang.org/x/sync v0.22.0 // indirect
)
