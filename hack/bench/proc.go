package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of the CPU times in /proc/<pid>/stat:
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// procSample is what /proc says about a process at one moment.
type procSample struct {
	// RSS is the resident set size (VmRSS), in bytes.
	RSS int64 `json:"rssBytes"`
	// Peak is the highest RSS so far (VmHWM), in bytes.
	Peak int64 `json:"peakRSSBytes"`
	// CPU is the user plus system time used so far.
	CPU time.Duration `json:"-"`
}

// readProc samples process pid.
func readProc(pid int) (procSample, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procSample{}, fmt.Errorf("read process status: %w", err)
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procSample{}, fmt.Errorf("read process stat: %w", err)
	}
	var s procSample
	if s.RSS, s.Peak, err = parseStatus(status); err != nil {
		return procSample{}, fmt.Errorf("pid %d: %w", pid, err)
	}
	if s.CPU, err = parseStat(stat); err != nil {
		return procSample{}, fmt.Errorf("pid %d: %w", pid, err)
	}
	return s, nil
}

// parseStatus returns VmRSS and VmHWM, in bytes, from /proc/<pid>/status,
// whose lines read "VmHWM:\t   51234 kB".
func parseStatus(data []byte) (rss, peak int64, err error) {
	found := map[string]*int64{"VmRSS:": &rss, "VmHWM:": &peak}
	seen := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		dst, ok := found[firstOf(fields)]
		if !ok {
			continue
		}
		if len(fields) != 3 || fields[2] != "kB" {
			return 0, 0, fmt.Errorf("unexpected status line %q", sc.Text())
		}
		kb, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("status line %q: %w", sc.Text(), err)
		}
		*dst = kb << 10
		seen++
	}
	if seen != len(found) {
		return 0, 0, fmt.Errorf("no VmRSS or VmHWM in status")
	}
	return rss, peak, nil
}

// parseStat returns utime+stime from /proc/<pid>/stat. The command name,
// field 2, is in parentheses and may hold spaces and parentheses itself,
// so fields are counted from the last ')': state is field 3, utime 14 and
// stime 15.
func parseStat(data []byte) (time.Duration, error) {
	end := bytes.LastIndexByte(data, ')')
	if end < 0 {
		return 0, fmt.Errorf("unexpected stat %q", data)
	}
	fields := strings.Fields(string(data[end+1:]))
	const utime, stime = 14 - 3, 15 - 3
	if len(fields) <= stime {
		return 0, fmt.Errorf("stat has %d fields after the command name, want more than %d", len(fields), stime)
	}
	var ticks int64
	for _, f := range []string{fields[utime], fields[stime]} {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("stat cpu time %q: %w", f, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

func firstOf(fields []string) string {
	if len(fields) == 0 {
		return ""
	}
	return fields[0]
}
