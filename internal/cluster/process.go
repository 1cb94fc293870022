package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// process is one component: a binary, its flags and its log file. It can be
// started again after it stopped, with the same flags (RestartAPIServer).
type process struct {
	name    string
	path    string
	args    []string
	logPath string

	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd has exited and been reaped
	err    error         // cmd.Wait's result; read only after exited is closed
}

// start launches the process in its own process group, appending its
// output to its log file.
func (p *process) start() error {
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	// The child keeps its own copy of the descriptor; ours is not needed.
	defer logFile.Close()
	fmt.Fprintf(logFile, "### %s %s %s\n", time.Now().Format(time.RFC3339), p.path, strings.Join(p.args, " "))

	cmd := exec.Command(p.path, p.args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("run %s: %w", p.path, err)
	}
	exited := make(chan struct{})
	p.cmd, p.exited = cmd, exited
	go func() {
		p.err = cmd.Wait()
		close(exited)
	}()
	return nil
}

// pid returns the process id of the last start, or 0.
func (p *process) pid() int {
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// stop sends SIGTERM to the process group, waits up to grace for the
// process to exit, then sends SIGKILL to whatever is left of the group.
func (p *process) stop(grace time.Duration) {
	if p.cmd == nil {
		return
	}
	pgid := p.cmd.Process.Pid // Setpgid makes the process its group's leader
	select {
	case <-p.exited:
	default:
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(grace):
		}
	}
	// Also reaches children the component may have started, which can
	// outlive it.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-p.exited
}

// waitReady polls ready until it returns nil. It fails early, with the tail
// of the log, if the process exits, and after timeout or when ctx ends.
func (p *process) waitReady(ctx context.Context, timeout time.Duration, ready func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		checkCtx, cancelCheck := context.WithTimeout(ctx, 2*time.Second)
		err := ready(checkCtx)
		cancelCheck()
		if err == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited (%v); its log ends:\n%s", p.name, p.err, p.logTail())
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w (last check: %v); its log ends:\n%s",
				p.name, ctx.Err(), err, p.logTail())
		case <-tick.C:
		}
	}
}

// logTail returns the last lines of the log file, for error messages.
func (p *process) logTail() string {
	const maxBytes, maxLines = 8 << 10, 25
	f, err := os.Open(p.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer f.Close()
	if info, err := f.Stat(); err == nil && info.Size() > maxBytes {
		_, _ = f.Seek(-maxBytes, io.SeekEnd)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(read log: %v)", err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > maxLines {
		lines = lines[len(lines)-maxLines:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// freePorts returns n distinct loopback TCP ports that are free right now.
// All listeners stay open until every port is chosen, so the n differ.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find free port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
