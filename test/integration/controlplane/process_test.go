package controlplane

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/watcher-dev/watcher/internal/cluster"
)

// shell returns a Process that runs script with /bin/sh, logging to a file
// in a fresh temporary folder.
func shell(t *testing.T, script string) *cluster.Process {
	return &cluster.Process{
		Name:    "script",
		Path:    "/bin/sh",
		Args:    []string{"-c", script},
		LogPath: filepath.Join(t.TempDir(), "script.log"),
	}
}

// waitExited waits for p's process to exit, for at most 10 s.
func waitExited(t *testing.T, p *cluster.Process) {
	t.Helper()
	select {
	case <-p.Exited():
	case <-time.After(10 * time.Second):
		t.Fatalf("%s (pid %d) still runs", p.Name, p.Pid())
	}
}

func readLog(t *testing.T, p *cluster.Process) string {
	t.Helper()
	data, err := os.ReadFile(p.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestProcessStartAndRestart(t *testing.T) {
	g := NewWithT(t)
	t.Setenv("GREETING", "inherited")
	p := shell(t, `echo "hello $GREETING from $HOME_MADE"; echo oops >&2; exit 3`)
	p.Env = []string{"GREETING=world"}

	g.Expect(p.Pid()).To(BeZero(), "not started yet")
	g.Expect(p.Exited()).To(BeNil())
	p.Stop(time.Second) // does nothing before Start

	g.Expect(p.Start()).To(Succeed())
	g.Expect(p.Pid()).NotTo(BeZero())
	waitExited(t, p)
	g.Expect(p.Err()).To(MatchError("exit status 3"))
	g.Expect(readLog(t, p)).To(MatchRegexp(`^### \S+ /bin/sh -c echo .*\nhello world from \noops\n$`),
		"a header line, then stdout and stderr; Env wins over the inherited variable")

	// Started again, as RestartAPIServer does: same settings, log appended.
	first := p.Pid()
	p.Env = append(p.Env, "HOME_MADE=env")
	g.Expect(p.Start()).To(Succeed())
	waitExited(t, p)
	g.Expect(p.Pid()).NotTo(Equal(first))
	log := readLog(t, p)
	g.Expect(strings.Count(log, "### ")).To(Equal(2), log)
	g.Expect(log).To(HaveSuffix("hello world from env\noops\n"))
}

func TestProcessStartFails(t *testing.T) {
	g := NewWithT(t)
	p := &cluster.Process{Name: "missing", Path: filepath.Join(t.TempDir(), "missing"), LogPath: filepath.Join(t.TempDir(), "m.log")}
	g.Expect(p.Start()).To(MatchError(ContainSubstring("run " + p.Path)))
	g.Expect(p.Pid()).To(BeZero())

	p = &cluster.Process{Name: "nolog", Path: "/bin/true", LogPath: filepath.Join(t.TempDir(), "no", "such", "dir.log")}
	g.Expect(p.Start()).To(MatchError(ContainSubstring("open log")))

	p = shell(t, "sleep 30")
	g.Expect(p.Start()).To(Succeed())
	defer p.Stop(time.Second)
	g.Expect(p.Start()).To(MatchError(ContainSubstring("already running as pid " + strconv.Itoa(p.Pid()))))
}

func TestProcessStop(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script string // writes the pid of a child it starts to $CHILD
		grace  time.Duration
		// wantErr is how the process ended; wantMin and wantMax bound how
		// long Stop took.
		wantErr          string
		wantMin, wantMax time.Duration
	}{{
		name:    "exits on SIGTERM",
		script:  `sleep 30 & echo $! > "$CHILD"; wait`,
		grace:   10 * time.Second,
		wantErr: "signal: terminated",
		wantMax: 5 * time.Second,
	}, {
		name:    "ignores SIGTERM, so gets SIGKILL after grace",
		script:  `trap '' TERM; sleep 30 & echo $! > "$CHILD"; wait`,
		grace:   300 * time.Millisecond,
		wantErr: "signal: killed",
		wantMin: 300 * time.Millisecond,
		wantMax: 5 * time.Second,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			childFile := filepath.Join(t.TempDir(), "child")
			p := shell(t, tc.script)
			p.Env = []string{"CHILD=" + childFile}
			g.Expect(p.Start()).To(Succeed())
			var child int
			g.Eventually(func() error {
				data, err := os.ReadFile(childFile)
				if err == nil {
					child, err = strconv.Atoi(strings.TrimSpace(string(data)))
				}
				return err
			}).WithTimeout(5 * time.Second).Should(Succeed())

			began := time.Now()
			p.Stop(tc.grace)
			took := time.Since(began)
			g.Expect(took).To(BeNumerically(">=", tc.wantMin))
			g.Expect(took).To(BeNumerically("<", tc.wantMax))
			g.Expect(p.Exited()).To(BeClosed())
			g.Expect(p.Err()).To(MatchError(tc.wantErr))
			g.Expect(processGone(p.Pid())).To(BeTrue())
			g.Eventually(func() bool { return processGone(child) }).WithTimeout(5*time.Second).
				Should(BeTrue(), "the child in the process group (pid %d) outlived Stop", child)
		})
	}
}

func TestProcessWaitReady(t *testing.T) {
	notYet := errors.New("not yet")
	for _, tc := range []struct {
		name    string
		script  string
		readyAt int // the call of ready that succeeds; 0: none does
		wantErr []string
		wantIs  error
	}{{
		name:    "ready on the third check",
		script:  "sleep 30",
		readyAt: 3,
	}, {
		name:    "exits first: fails early with the log",
		script:  "echo bad flag >&2; exit 2",
		wantErr: []string{"script exited (exit status 2); its log ends:\n", "bad flag"},
	}, {
		name:    "never ready: fails after the timeout",
		script:  "echo starting; sleep 30",
		wantErr: []string{"script not ready: context deadline exceeded (last check: not yet)", "starting"},
		wantIs:  context.DeadlineExceeded,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p := shell(t, tc.script)
			p.ReadyPoll = 10 * time.Millisecond
			g.Expect(p.Start()).To(Succeed())
			defer p.Stop(time.Second)
			calls := 0
			began := time.Now()
			err := p.WaitReady(t.Context(), time.Second, func(ctx context.Context) error {
				calls++
				if _, ok := ctx.Deadline(); !ok {
					return errors.New("check without deadline")
				}
				if calls == tc.readyAt {
					return nil
				}
				return notYet
			})
			if tc.wantErr == nil {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(calls).To(Equal(tc.readyAt))
				return
			}
			for _, want := range tc.wantErr {
				g.Expect(err).To(MatchError(ContainSubstring(want)))
			}
			if tc.wantIs != nil {
				g.Expect(errors.Is(err, tc.wantIs)).To(BeTrue(), "%v", err)
			} else {
				g.Expect(time.Since(began)).To(BeNumerically("<", 900*time.Millisecond), "it should not wait out the timeout")
			}
		})
	}

	t.Run("not started", func(t *testing.T) {
		p := &cluster.Process{Name: "idle"}
		err := p.WaitReady(t.Context(), time.Second, func(context.Context) error { return nil })
		NewWithT(t).Expect(err).To(MatchError("idle was not started"))
	})
}
