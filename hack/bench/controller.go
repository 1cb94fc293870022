package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	// readyPoll is how often the controller's readiness URL is polled.
	readyPoll = 50 * time.Millisecond
	// stopGrace is how long the controller has to exit after SIGTERM.
	stopGrace = 5 * time.Second
)

// controllerProcess is the controller under test, run as a child process
// in its own process group with its output in a log file.
type controllerProcess struct {
	cmd     *exec.Cmd
	logPath string
	started time.Time
	exited  chan struct{} // closed once cmd has exited and been reaped
	err     error         // cmd.Wait's result; read only after exited is closed
	stopped sync.Once
}

// startController runs argv with the extra environment variables env,
// its stdout and stderr going to logPath.
func startController(argv, env []string, logPath string) (*controllerProcess, error) {
	if len(argv) == 0 {
		return nil, errors.New("start controller: empty command")
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create controller log: %w", err)
	}
	defer logFile.Close() // the child has its own copy
	fmt.Fprintf(logFile, "### %s %s\n", time.Now().Format(time.RFC3339), strings.Join(argv, " "))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = sysProcAttr()
	p := &controllerProcess{cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	p.started = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start controller %s: %w", argv[0], err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// pid returns the controller's process id.
func (p *controllerProcess) pid() int { return p.cmd.Process.Pid }

// waitReady polls url every readyPoll until it answers 200 and returns the
// time from start to then. It fails if the controller exits, after
// timeout, or when ctx ends.
func (p *controllerProcess) waitReady(ctx context.Context, url string, timeout time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	defer client.CloseIdleConnections()
	tick := time.NewTicker(readyPoll)
	defer tick.Stop()
	var last error
	for {
		if last = getOK(ctx, client, url); last == nil {
			return time.Since(p.started), nil
		}
		select {
		case <-p.exited:
			return 0, p.exitError()
		case <-ctx.Done():
			return 0, fmt.Errorf("controller not ready after %s: %w (last: %v); see %s", timeout, ctx.Err(), last, p.logPath)
		case <-tick.C:
		}
	}
}

// getOK GETs url and wants 200 OK.
func getOK(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// running returns an error if the controller has exited.
func (p *controllerProcess) running() error {
	select {
	case <-p.exited:
		return p.exitError()
	default:
		return nil
	}
}

// exitError describes how the controller ended, with the end of its log.
// Call it only after exited is closed.
func (p *controllerProcess) exitError() error {
	return fmt.Errorf("controller exited (%v); %s ends:\n%s", p.err, p.logPath, logTail(p.logPath))
}

// stop sends SIGTERM to the controller's process group, then SIGKILL
// after stopGrace, and waits until it has exited. Only the first call does
// anything.
func (p *controllerProcess) stop() {
	p.stopped.Do(func() {
		pgid := p.pid() // Setpgid makes it its group's leader
		select {
		case <-p.exited:
		default:
			_ = syscall.Kill(-pgid, syscall.SIGTERM)
			select {
			case <-p.exited:
			case <-time.After(stopGrace):
			}
		}
		// Also reaches children the controller may have started.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.exited
	})
}

// logTail returns the last lines of a log file, for error messages.
func logTail(path string) string {
	const maxBytes, maxLines = 8 << 10, 20
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	data = data[max(0, len(data)-maxBytes):]
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	lines = lines[max(0, len(lines)-maxLines):]
	return string(bytes.Join(lines, []byte("\n")))
}
