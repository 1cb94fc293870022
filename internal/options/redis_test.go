package options_test

import (
	"io"
	"strings"
	"testing"

	"github.com/watcher-dev/watcher/internal/options"
)

// serviceLinks is what Kubernetes puts in the environment of every pod of a
// namespace holding a Service named redis (enableServiceLinks, on by
// default).
var serviceLinks = map[string]string{
	"REDIS_SERVICE_HOST":        "10.96.0.5",
	"REDIS_SERVICE_PORT":        "6379",
	"REDIS_PORT":                "tcp://10.96.0.5:6379",
	"REDIS_PORT_6379_TCP":       "tcp://10.96.0.5:6379",
	"REDIS_PORT_6379_TCP_PROTO": "tcp",
	"REDIS_PORT_6379_TCP_PORT":  "6379",
	"REDIS_PORT_6379_TCP_ADDR":  "10.96.0.5",
	"REDIS_SERVICE_PORT_REDIS":  "6379",
}

func with(base map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// TestRedisSettingsOnlyInRedisMode: the Redis settings are checked only in
// the redis lock mode; elsewhere an invalid one is ignored and reported in
// Notes. The tcp://host:port form of REDIS_PORT gives the port.
func TestRedisSettingsOnlyInRedisMode(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		env       map[string]string
		wantErr   []string // substrings of the error; none: no error
		wantLock  string
		wantPort  int
		wantNotes []string // a substring of each note, in order
	}{
		{name: "service links, lease mode", env: serviceLinks, wantLock: "lease", wantPort: 6379},
		{name: "service links, none mode", env: with(serviceLinks, "LOCK_BACKEND", "none"), wantLock: "none", wantPort: 6379},
		{name: "service link, redis mode", env: with(serviceLinks, "REDIS_HOST", "redis", "REDIS_PORT", "tcp://10.96.0.5:6380"),
			wantLock: "redis", wantPort: 6380, wantNotes: []string{`Redis port 6380 taken from "tcp://10.96.0.5:6380"`}},
		{name: "IPv6 service link, redis mode", args: []string{"--lock=redis"}, env: map[string]string{"REDIS_PORT": "tcp://[fd00::5]:7000"},
			wantLock: "redis", wantPort: 7000, wantNotes: []string{"Redis port 7000"}},
		{name: "plain port, redis mode", env: map[string]string{"REDIS_HOST": "redis", "REDIS_PORT": "6380"}, wantLock: "redis", wantPort: 6380},
		{name: "invalid REDIS_PORT, lease mode", env: map[string]string{"REDIS_PORT": "tcp://10.96.0.5"},
			wantLock: "lease", wantPort: 6379, wantNotes: []string{`ignored, as the lock mode lease uses no Redis: invalid REDIS_PORT "tcp://10.96.0.5"`}},
		{name: "invalid --redis-port, none mode", args: []string{"--lock=none", "--redis-port=abc"},
			wantLock: "none", wantPort: 6379, wantNotes: []string{`invalid --redis-port "abc"`}},
		{name: "several invalid, lease mode", env: map[string]string{"DB": "-1", "LOCK_EXPIRATION_TIME": "0", "REDIS_SENTINEL_MASTER": "m", "PASSWORD": password},
			wantLock: "lease", wantPort: 6379, wantNotes: []string{"LOCK_EXPIRATION_TIME", "DB", "REDIS_SENTINEL_MASTER"}},
		{name: "invalid REDIS_PORT, redis mode", env: map[string]string{"REDIS_HOST": "redis", "REDIS_PORT": "tcp://10.96.0.5"},
			wantErr: []string{"REDIS_PORT", "tcp://host:port"}},
		{name: "invalid --redis-port, redis mode", args: []string{"--lock=redis", "--redis-port=abc"}, wantErr: []string{"--redis-port", `"abc"`}},
		{name: "sentinel without addresses, redis mode", args: []string{"--lock=redis"}, env: map[string]string{"REDIS_SENTINEL_MASTER": "m", "PASSWORD": password},
			wantErr: []string{"REDIS_SENTINEL_MASTER"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := options.Parse(tt.args, env(tt.env), io.Discard)
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("Parse() = %+v, want an error", o)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				if strings.Contains(err.Error(), password) {
					t.Errorf("error contains the password: %q", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse() error: %v", err)
			}
			if o.Lock != tt.wantLock || o.Redis.Port != tt.wantPort {
				t.Errorf("Lock, Redis.Port = %q, %d; want %q, %d", o.Lock, o.Redis.Port, tt.wantLock, tt.wantPort)
			}
			if len(o.Notes) != len(tt.wantNotes) {
				t.Fatalf("Notes = %q, want %d notes with %q", o.Notes, len(tt.wantNotes), tt.wantNotes)
			}
			for i, w := range tt.wantNotes {
				if !strings.Contains(o.Notes[i], w) {
					t.Errorf("note %q does not contain %q", o.Notes[i], w)
				}
				if strings.Contains(o.Notes[i], password) {
					t.Errorf("note contains the password: %q", o.Notes[i])
				}
			}
			if err := o.Validate(); err != nil {
				t.Errorf("Validate() of parsed options: %v", err)
			}
		})
	}
}

// TestRedisPortForms: the forms REDIS_PORT takes, in the redis mode.
func TestRedisPortForms(t *testing.T) {
	tests := []struct {
		value string
		want  int // 0: an error
	}{
		{"6379", 6379},
		{" 6380 ", 6380},
		{"tcp://10.96.0.5:6379", 6379},
		{"tcp://redis.shop.svc:7000", 7000},
		{"tcp://[fd00::5]:6379", 6379},
		{"65535", 65535},
		{"0", 0},
		{"65536", 0},
		{"", 0},
		{"tcp://10.96.0.5", 0},
		{"tcp://10.96.0.5:", 0},
		{"tcp://:6379", 0},
		{"tcp://10.96.0.5:0", 0},
		{"tcp://10.96.0.5:6379/x", 0},
		{"tcp://user@10.96.0.5:6379", 0},
		{"udp://10.96.0.5:6379", 0},
		{"http://10.96.0.5:6379", 0},
		{"10.96.0.5:6379", 0},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			o, err := options.Parse([]string{"--lock=redis"}, env(map[string]string{"REDIS_PORT": tt.value}), io.Discard)
			switch {
			case tt.want == 0 && err == nil:
				t.Errorf("REDIS_PORT=%q gave port %d, want an error", tt.value, o.Redis.Port)
			case tt.want != 0 && err != nil:
				t.Errorf("REDIS_PORT=%q: error %v", tt.value, err)
			case tt.want != 0 && o.Redis.Port != tt.want:
				t.Errorf("REDIS_PORT=%q gave port %d, want %d", tt.value, o.Redis.Port, tt.want)
			}
		})
	}
}
