package install

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/tools/clientcmd"
)

// nonroot is the user the image runs as.
const nonroot = 65532

// TestImage builds the image without a container daemon (hack/image.sh),
// reads the OCI layout it wrote as a runtime would (index, manifest,
// config, layers), checks that the entrypoint is the watcher binary and the
// user is not root, unpacks the root filesystem and starts that binary, as
// that user when the test runs as root, against the local control plane
// with the environment of the chart's Deployment until it is ready.
func TestImage(t *testing.T) {
	g := NewWithT(t)
	out := t.TempDir()
	// The unpacked binary runs as another user, who must reach it.
	for _, dir := range []string{filepath.Dir(out), out} {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(filepath.Join(root, "hack", "image.sh"), out)
	cmd.Stderr = os.Stderr
	if b, err := cmd.Output(); err != nil {
		t.Fatalf("hack/image.sh: %v\n%s", err, b)
	}
	layout := filepath.Join(out, "oci")
	var index struct {
		Manifests []struct{ Digest string } `json:"manifests"`
	}
	readJSON(t, layout, "", &index, "index.json")
	g.Expect(index.Manifests).To(HaveLen(1))
	var manifest struct {
		Config struct{ Digest string } `json:"config"`
		Layers []struct {
			MediaType, Digest string
		} `json:"layers"`
	}
	readJSON(t, layout, index.Manifests[0].Digest, &manifest)
	var config struct {
		OS, Architecture string
		Config           struct {
			Entrypoint []string
			Cmd        []string
			User       string
		} `json:"config"`
	}
	readJSON(t, layout, manifest.Config.Digest, &config)
	g.Expect(config.OS).To(Equal("linux"))
	g.Expect(config.Config.Entrypoint).To(Equal([]string{"/watcher"}))
	g.Expect(config.Config.User).To(Equal("65532:65532"), "the image runs as a user that is not root")
	g.Expect(manifest.Layers).To(HaveLen(1), "FROM scratch: one layer")

	rootfs := filepath.Join(out, "rootfs")
	for _, l := range manifest.Layers {
		g.Expect(l.MediaType).To(Equal("application/vnd.oci.image.layer.v1.tar+gzip"))
		untar(t, blob(layout, l.Digest), rootfs)
	}
	passwd, err := os.ReadFile(filepath.Join(rootfs, "etc", "passwd"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(passwd)).To(ContainSubstring("nonroot:x:65532:65532:"))
	g.Expect(filepath.Join(rootfs, "etc", "ssl", "certs", "ca-certificates.crt")).To(BeAnExistingFile())

	// The docker tarball names the image.
	g.Expect(tarEntries(t, filepath.Join(out, "watcher.tar"))).To(ContainElement("manifest.json"))

	ns := namespace(t, "image", restricted)
	d := deployment(t, render(t, "watcher", ns))
	var cred *syscall.Credential
	if os.Getuid() == 0 {
		cred = &syscall.Credential{Uid: nonroot, Gid: nonroot}
	}
	w := startWatcher(t, filepath.Join(rootfs, "watcher"), d, readableKubeconfig(t), cred)
	status, err := os.ReadFile("/proc/" + strconv.Itoa(w.Pid()) + "/status")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(uid(string(status))).NotTo(Equal("0"), "the image's binary runs as a user that is not root")
	noForbidden(t, w)
}

// blob returns the path of a blob of an OCI layout.
func blob(layout, digest string) string {
	return filepath.Join(layout, "blobs", strings.Replace(digest, ":", string(filepath.Separator), 1))
}

// readJSON decodes the blob digest of an OCI layout, or the file of it
// named by path when digest is empty.
func readJSON(t *testing.T, layout, digest string, v any, path ...string) {
	t.Helper()
	p := blob(layout, digest)
	if digest == "" {
		p = filepath.Join(append([]string{layout}, path...)...)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
}

// untar unpacks a gzipped layer into dir (regular files and folders only).
func untar(t *testing.T, layer, dir string) {
	t.Helper()
	f, err := os.Open(layer)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		} else if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			err = writeFile(p, tr, os.FileMode(h.Mode))
		default:
			t.Fatalf("layer entry %s of type %c", h.Name, h.Typeflag)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func writeFile(p string, r io.Reader, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Chmod(p, mode) // the umask may have narrowed it
}

// tarEntries lists the names in an uncompressed tarball.
func tarEntries(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var names []string
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		} else if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
}

// uid returns the real user ID of a /proc/<pid>/status.
func uid(status string) string {
	for _, l := range strings.Split(status, "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "Uid:" {
			return f[1]
		}
	}
	return ""
}

// readableKubeconfig copies the admin kubeconfig where any user may read
// it, for a process that runs as another user.
func readableKubeconfig(t *testing.T) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(kube.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
