package options

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Validate checks what the flag types alone cannot: selectors, annotation
// key, namespace names and listen addresses.
func (o *Options) Validate() error {
	var errs []error
	bad := func(flag, env, msg string, args ...any) {
		errs = append(errs, fmt.Errorf("invalid --%s (env %s): %s", flag, env, fmt.Sprintf(msg, args...)))
	}
	for _, s := range []struct{ flag, env, value string }{
		{"workload-selector", "WORKLOAD_SELECTOR", o.WorkloadSelector},
		{"config-selector", "CONFIG_SELECTOR", o.ConfigSelector},
	} {
		if _, err := labels.Parse(s.value); err != nil {
			bad(s.flag, s.env, "want a label selector such as app=web,tier!=db: %v", err)
		}
	}
	if msgs := validation.IsQualifiedName(o.Annotation); len(msgs) > 0 {
		bad("annotation", "ANNOTATION", "want an annotation key such as require-restart or example.com/restart: %s", msgs[0])
	}
	for _, n := range []struct {
		flag, env string
		names     []string
	}{
		{"namespaces", "NAMESPACES", o.Namespaces},
		{"ignore-configmap-namespaces", "IGNORE_CONFIGMAP_NAMESPACES", o.IgnoreConfigMapNamespaces},
		{"ignore-secret-namespaces", "IGNORE_SECRET_NAMESPACES", o.IgnoreSecretNamespaces},
	} {
		for _, ns := range n.names {
			if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
				bad(n.flag, n.env, "%q is not a namespace name: %s", ns, msgs[0])
			}
		}
	}
	for _, a := range []struct{ flag, env, addr string }{
		{"metrics-addr", "METRICS_ADDR", o.MetricsAddr},
		{"health-addr", "HEALTH_ADDR", o.HealthAddr},
		{"pprof-addr", "PPROF_ADDR", o.PprofAddr},
	} {
		if err := checkAddr(a.addr); err != nil {
			bad(a.flag, a.env, `want host:port, :port or "0": %v`, err)
		}
	}
	if o.Namespace != "" {
		if msgs := validation.IsDNS1123Label(o.Namespace); len(msgs) > 0 {
			bad("lease-namespace", "POD_NAMESPACE", "%q is not a namespace name: %s", o.Namespace, msgs[0])
		}
	}
	if msgs := validation.IsDNS1123Subdomain(o.HashKeySecret); len(msgs) > 0 {
		bad("hash-key-secret", "HASH_KEY_SECRET", "%q is not a Secret name: %s", o.HashKeySecret, msgs[0])
	}
	if l := o.Lease; l.RetryPeriod <= 0 || l.RetryPeriod >= l.RenewDeadline || l.RenewDeadline >= l.Duration {
		bad("lease-duration", "LEASE_DURATION", "want 0 < retry period (%s) < renew deadline (%s) < lease duration (%s)", l.RetryPeriod, l.RenewDeadline, l.Duration)
	}
	if msgs := validation.IsDNS1123Subdomain(o.Lease.Name); len(msgs) > 0 {
		bad("lease-name", "LEASE_NAME", "%q is not a Lease name: %s", o.Lease.Name, msgs[0])
	}
	if (o.Redis.SentinelMaster == "") != (len(o.Redis.SentinelAddrs) == 0) {
		bad("redis-sentinel-master", "REDIS_SENTINEL_MASTER", "set it together with --redis-sentinel-addrs (REDIS_SENTINEL_ADDRS)")
	}
	for _, a := range o.Redis.SentinelAddrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			bad("redis-sentinel-addrs", "REDIS_SENTINEL_ADDRS", "want host:port: %v", err)
		}
	}
	if o.Redis.TLSCAFile != "" {
		if _, err := os.Stat(o.Redis.TLSCAFile); err != nil {
			bad("redis-tls-ca-file", "REDIS_TLS_CA_FILE", "cannot read it: %v", err)
		}
	}
	if strings.TrimSpace(o.Redis.Host) == "" {
		bad("redis-host", "REDIS_HOST", "want a host name or address")
	}
	return errors.Join(errs...)
}

func checkAddr(addr string) error {
	if addr == "0" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("bad port %q", port)
	}
	return nil
}
