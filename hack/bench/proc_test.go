package main

import (
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestParseStatus(t *testing.T) {
	g := NewWithT(t)
	status := "Name:\twatcher\nVmPeak:\t 1300000 kB\nVmHWM:\t   51234 kB\nVmRSS:\t   40000 kB\nThreads:\t12\n"
	rss, peak, err := parseStatus([]byte(status))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rss).To(Equal(int64(40000 * 1024)))
	g.Expect(peak).To(Equal(int64(51234 * 1024)))

	_, _, err = parseStatus([]byte("Name:\tzombie\nState:\tZ (zombie)\n"))
	g.Expect(err).To(HaveOccurred(), "a zombie has no VmRSS")
	_, _, err = parseStatus([]byte("VmHWM:\t 12 MB\nVmRSS:\t 1 kB\n"))
	g.Expect(err).To(HaveOccurred(), "unknown unit")
}

func TestParseStat(t *testing.T) {
	g := NewWithT(t)
	// The command name may hold spaces and parentheses: fields count from the last ')'.
	stat := "4242 (we(ird) name) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 130 0 0 20 0 12 0 100 1000000 10000\n"
	cpu, err := parseStat([]byte(stat))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cpu).To(Equal(3800 * time.Millisecond)) // (250+130) ticks of 10 ms

	_, err = parseStat([]byte("4242 (short) S 1 2"))
	g.Expect(err).To(HaveOccurred())
	_, err = parseStat([]byte("no parenthesis"))
	g.Expect(err).To(HaveOccurred())
}

// TestReadProcSelf reads the test's own process, which is always there.
func TestReadProcSelf(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	g := NewWithT(t)
	s, err := readProc(os.Getpid())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.RSS).To(BeNumerically(">", 1<<20))
	g.Expect(s.Peak).To(BeNumerically(">=", s.RSS))
}
