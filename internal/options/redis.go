package options

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
)

// redisPort is Redis's TCP port: a number, or the tcp://host:port form that
// Kubernetes gives REDIS_PORT in every pod of a namespace holding a Service
// named redis (a "service link"), whose port is taken.
type redisPort struct {
	port *int
	// link is the service link the port was taken from, if it was.
	link string
}

func (p *redisPort) String() string { return strconv.Itoa(*p.port) }
func (p *redisPort) Type() string   { return "port" }
func (p *redisPort) Set(v string) error {
	v = strings.TrimSpace(v)
	s, link := v, ""
	if strings.HasPrefix(v, "tcp://") {
		u, err := url.Parse(v)
		if err != nil || u.Hostname() == "" || u.Path != "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("want a TCP port from 1 to 65535, or tcp://host:port")
		}
		s, link = u.Port(), v
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("want a TCP port: a whole number from 1 to 65535, or tcp://host:port")
	}
	*p.port, p.link = n, link
	return nil
}

// notes says where the port came from, if it was a service link.
func (p *redisPort) notes() []string {
	if p.link == "" {
		return nil
	}
	return []string{fmt.Sprintf("Redis port %d taken from %q, the form Kubernetes gives REDIS_PORT for a Service named redis; the host is still --redis-host (REDIS_HOST)", *p.port, p.link)}
}

// validateRedis checks the Redis settings: Parse and Validate do so only in
// the redis lock mode.
func (o *Options) validateRedis() []error {
	var p problems
	r := o.Redis
	if (r.SentinelMaster == "") != (len(r.SentinelAddrs) == 0) {
		p.add("redis-sentinel-master", "REDIS_SENTINEL_MASTER", "set it together with --redis-sentinel-addrs (REDIS_SENTINEL_ADDRS)")
	}
	for _, a := range r.SentinelAddrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			p.add("redis-sentinel-addrs", "REDIS_SENTINEL_ADDRS", "want host:port: %v", err)
		}
	}
	if r.TLSCAFile != "" {
		if _, err := os.Stat(r.TLSCAFile); err != nil {
			p.add("redis-tls-ca-file", "REDIS_TLS_CA_FILE", "cannot read it: %v", err)
		}
	}
	if strings.TrimSpace(r.Host) == "" {
		p.add("redis-host", "REDIS_HOST", "want a host name or address")
	}
	return p
}
