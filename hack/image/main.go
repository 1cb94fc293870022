// Command image builds watcher's container image without a container
// daemon: one layer holding the static binary, /etc/passwd and /etc/group
// naming the non-root user, and a CA bundle, on an empty base (FROM
// scratch), with the binary as entrypoint and user 65532:65532. It writes an
// OCI image layout (a folder `crane push`, `skopeo copy oci:` and
// `podman load` read) and, with -tarball, a tarball `docker load` reads.
//
// The layer is reproducible: the same inputs give the same digests (every
// file is dated at the Unix epoch and owned by root).
//
//	image -binary bin/image/watcher -layout bin/image/oci -tarball bin/image/watcher.tar
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// nonroot is the user the image runs as: distroless's nonroot.
const nonroot = "65532"

func main() {
	binary := flag.String("binary", "", "static watcher binary to put in the image")
	caBundle := flag.String("ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "PEM bundle of CA certificates (Debian's ca-certificates); empty: none")
	layoutDir := flag.String("layout", "", "OCI image layout folder to write (replaced)")
	tarPath := flag.String("tarball", "", "docker-loadable tarball to write; empty: none")
	tag := flag.String("tag", "ghcr.io/watcher-dev/watcher:latest", "image name in the tarball")
	arch := flag.String("arch", "amd64", "architecture of the binary")
	flag.Parse()
	if err := run(*binary, *caBundle, *layoutDir, *tarPath, *tag, *arch); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(binary, caBundle, layoutDir, tarPath, tag, arch string) error {
	if binary == "" || layoutDir == "" {
		return fmt.Errorf("-binary and -layout are required")
	}
	img, err := build(binary, caBundle, arch)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(layoutDir); err != nil {
		return err
	}
	p, err := layout.Write(layoutDir, empty.Index)
	if err != nil {
		return fmt.Errorf("write layout %s: %w", layoutDir, err)
	}
	if err := p.AppendImage(img); err != nil {
		return fmt.Errorf("write layout %s: %w", layoutDir, err)
	}
	if tarPath != "" {
		ref, err := name.NewTag(tag)
		if err != nil {
			return fmt.Errorf("tag %s: %w", tag, err)
		}
		if err := tarball.WriteToFile(tarPath, ref, img); err != nil {
			return fmt.Errorf("write tarball %s: %w", tarPath, err)
		}
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Println(d)
	return nil
}

// build returns the image: the empty base, one layer, the config.
func build(binary, caBundle, arch string) (v1.Image, error) {
	files := []file{
		{path: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:" + nonroot + ":" + nonroot + ":nonroot:/home/nonroot:/sbin/nologin\n")},
		{path: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:" + nonroot + ":\n")},
	}
	if caBundle != "" {
		data, err := os.ReadFile(caBundle)
		if err != nil {
			return nil, fmt.Errorf("read CA bundle: %w", err)
		}
		files = append(files, file{path: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: data})
	}
	data, err := os.ReadFile(binary)
	if err != nil {
		return nil, fmt.Errorf("read binary: %w", err)
	}
	files = append(files, file{path: "watcher", mode: 0o755, data: data})
	layerData, err := tarOf(files)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerData)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{CreatedBy: "hack/image: watcher, /etc/passwd, /etc/group, CA bundle", Created: v1.Time{Time: time.Unix(0, 0)}}})
	if err != nil {
		return nil, fmt.Errorf("append layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Created = v1.Time{Time: time.Unix(0, 0)}
	cf.Config.Entrypoint = []string{"/watcher"}
	cf.Config.User = nonroot + ":" + nonroot
	cf.Config.WorkingDir = "/"
	cf.Config.Env = []string{"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
	cf.Config.Labels = map[string]string{
		"org.opencontainers.image.source":      "https://github.com/watcher-dev/watcher",
		"org.opencontainers.image.title":       "watcher",
		"org.opencontainers.image.description": "restarts workloads when the data of a ConfigMap or Secret they use changes",
	}
	return mutate.ConfigFile(img, cf)
}

// file is one regular file of the layer.
type file struct {
	path string
	mode int64
	data []byte
}

// tarOf returns an uncompressed tar of files and the folders above them,
// owned by root and dated at the Unix epoch.
func tarOf(files []file) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	dirs := map[string]bool{}
	for _, f := range files {
		for i := range len(f.path) {
			if f.path[i] != '/' || dirs[f.path[:i+1]] {
				continue
			}
			dirs[f.path[:i+1]] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: f.path[:i+1], Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
				return nil, err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.path, Mode: f.mode, Size: int64(len(f.data)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
