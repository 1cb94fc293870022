package options_test

import (
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/watcher-dev/watcher/internal/options"
)

// fuzzInput turns fuzzed text into an environment, written as NAME=value
// lines, and arguments, written one a line.
func fuzzInput(envText, argsText string) (map[string]string, []string) {
	e := map[string]string{}
	for _, line := range strings.Split(envText, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			e[k] = v
		}
	}
	var args []string
	if argsText != "" {
		args = strings.Split(argsText, "\n")
	}
	return e, args
}

// output is what Parse shows of its input: its error, or its notes.
func output(e map[string]string, args []string) (*options.Options, string, error) {
	o, err := options.Parse(args, env(e), io.Discard)
	if err != nil {
		return nil, err.Error(), err
	}
	return o, strings.Join(o.Notes, "\n"), nil
}

// FuzzParse: whatever the environment and the command line, Parse does not
// panic, and either fails or returns options that pass Validate. Neither
// its error nor its notes show a Redis password: they show it no more often
// than when the passwords are replaced by another value.
func FuzzParse(f *testing.F) {
	for _, s := range settings {
		f.Add(s.env+"="+s.value, "")
		f.Add("", "--"+s.flag+"="+s.value)
	}
	var links []string
	for k, v := range serviceLinks {
		links = append(links, k+"="+v)
	}
	f.Add(strings.Join(links, "\n"), "")
	f.Add(strings.Join(links, "\n")+"\nREDIS_HOST=redis", "--lock=redis")
	f.Add("PASSWORD="+password+"\nDB=x\nREDIS_PORT=tcp://h", "--lock\nredis")
	f.Add("LOCK_BACKEND=redis\nREDIS_SENTINEL_MASTER=m\nREDIS_SENTINEL_ADDRS=a:1,b\nREDIS_SENTINEL_PASSWORD="+password, "--redis-password\n"+password)
	f.Add("LEASE_DURATION=1s\nCACHE_SYNC_TIMEOUT=0s", "--help")
	f.Add("REDIS_PORT=abc\nREDIS_SENTINEL_MASTER=m\nREDIS_TLS_CA_FILE=/nonexistent", "--lock=none")
	// Reloader's flags in both forms, in the environments of both charts.
	var watcherEnv, reloaderEnv []string
	for k, v := range watcherChartEnv {
		watcherEnv = append(watcherEnv, k+"="+v)
	}
	for k, v := range reloaderChartEnv {
		reloaderEnv = append(reloaderEnv, k+"="+v)
	}
	for _, r := range reloaderFlagValues {
		f.Add(strings.Join(watcherEnv, "\n"), "--"+r.flag+"="+r.value)
		f.Add(strings.Join(reloaderEnv, "\n"), "--"+r.flag+"\n"+r.value)
	}
	f.Add("RELOADER_NAMESPACE=r\nKUBERNETES_NAMESPACE=k\nALERT_SINK=raw", "--namespaces-to-ignore\nkube-system\n--namespace-selector=\"a:b\"\n--auto-reload-all\nfalse")
	f.Fuzz(func(t *testing.T, envText, argsText string) {
		e, args := fuzzInput(envText, argsText)
		o, shown, err := output(e, args)
		if err == nil {
			if verr := o.Validate(); verr != nil {
				t.Fatalf("Parse(%q, %q) succeeded with options that fail Validate: %v", args, e, verr)
			}
		}
		secrets, e2 := replacePasswords(e, "\x01")
		_, shown2, _ := output(e2, args)
		for _, s := range secrets {
			if s != "" && strings.Count(shown, s) > strings.Count(shown2, s) {
				t.Fatalf("Parse(%q, %q) shows the password %q: %s", args, e, s, shown)
			}
		}
	})
}

// replacePasswords returns the Redis passwords set in the environment e,
// and e with each replaced by with. (A password on the command line is not
// checked here: which argument is a flag's value is pflag's to say.)
func replacePasswords(e map[string]string, with string) ([]string, map[string]string) {
	var secrets []string
	e2 := map[string]string{}
	for k, v := range e {
		if k == "PASSWORD" || k == "REDIS_SENTINEL_PASSWORD" {
			secrets, v = append(secrets, v), with
		}
		e2[k] = v
	}
	return secrets, e2
}

// FuzzRedisPort: in the redis mode, any REDIS_PORT either fails or gives a
// TCP port; a plain number gives itself.
func FuzzRedisPort(f *testing.F) {
	for _, s := range []string{"6379", " 6380", "0", "65536", "tcp://10.96.0.5:6379", "tcp://[::1]:1", "tcp://x", "tcp://:1", "-1", "+7"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		o, err := options.Parse([]string{"--lock=redis"}, env(map[string]string{"REDIS_PORT": value}), io.Discard)
		if err != nil {
			return
		}
		if o.Redis.Port < 1 || o.Redis.Port > 65535 {
			t.Fatalf("REDIS_PORT=%q gave port %d", value, o.Redis.Port)
		}
		if n, nerr := strconv.Atoi(strings.TrimSpace(value)); nerr == nil && n != o.Redis.Port {
			t.Fatalf("REDIS_PORT=%q gave port %d", value, o.Redis.Port)
		}
	})
}
