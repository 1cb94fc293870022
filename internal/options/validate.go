package options

import (
	"errors"
	"fmt"
	"net"
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
