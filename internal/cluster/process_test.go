package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// TestProcessLogTail: the end of a log, at most 25 lines and 8 KiB. The
// tests that start processes are in test/integration/controlplane.
func TestProcessLogTail(t *testing.T) {
	g := NewWithT(t)
	p := &Process{LogPath: filepath.Join(t.TempDir(), "x.log")}
	g.Expect(p.LogTail()).To(HavePrefix("(no log: "))

	var b strings.Builder
	for i := range 100 {
		fmt.Fprintf(&b, "line %d %s\n", i, strings.Repeat("x", 200)) // 100 lines of ~210 bytes: over 8 KiB
	}
	g.Expect(os.WriteFile(p.LogPath, []byte(b.String()), 0o644)).To(Succeed())
	lines := strings.Split(p.LogTail(), "\n")
	g.Expect(lines).To(HaveLen(25))
	g.Expect(lines[0]).To(HavePrefix("line 75 "))
	g.Expect(lines[24]).To(HavePrefix("line 99 "))
}
