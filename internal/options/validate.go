package options

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/workload"
)

// Validate checks what the flag types alone cannot: selectors, annotation
// key, namespace names, listen addresses, timings and, in the redis lock
// mode, the Redis settings.
func (o *Options) Validate() error {
	errs := o.validate()
	if o.Lock == LockRedis {
		errs = append(errs, o.validateRedis()...)
	}
	return errors.Join(errs...)
}

// problems collects the errors of a validation.
type problems []error

func (p *problems) add(flag, env, msg string, args ...any) {
	*p = append(*p, fmt.Errorf("invalid --%s (env %s): %s", flag, env, fmt.Sprintf(msg, args...)))
}

// validate checks the settings of every lock mode.
func (o *Options) validate() []error {
	var p problems
	for _, s := range []struct{ flag, env, value string }{
		{"workload-selector", "WORKLOAD_SELECTOR", o.WorkloadSelector},
		{"config-selector", "CONFIG_SELECTOR", o.ConfigSelector},
		{"namespace-selector", "NAMESPACE_SELECTOR", o.NamespaceSelector},
	} {
		if _, err := labels.Parse(s.value); err != nil {
			p.add(s.flag, s.env, "want a label selector such as app=web,tier!=db: %v", err)
		}
	}
	if msgs := validation.IsQualifiedName(o.Annotation); len(msgs) > 0 {
		p.add("annotation", "ANNOTATION", "want an annotation key such as require-restart or example.com/restart: %s", msgs[0])
	}
	if err := o.AnnotationKeys.Validate(); err != nil {
		p.add("annotation-keys", "ANNOTATION_KEYS", "%v", err)
	}
	for _, n := range []struct {
		flag, env string
		names     []string
	}{
		{"namespaces", "NAMESPACES, else KUBERNETES_NAMESPACE", o.Namespaces},
		{"ignore-configmap-namespaces", "IGNORE_CONFIGMAP_NAMESPACES", o.IgnoreConfigMapNamespaces},
		{"ignore-secret-namespaces", "IGNORE_SECRET_NAMESPACES", o.IgnoreSecretNamespaces},
	} {
		for _, ns := range n.names {
			if ns == AllNamespaces && n.flag != "namespaces" {
				continue
			}
			if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
				p.add(n.flag, n.env, "%q is not a namespace name: %s", ns, msgs[0])
			}
		}
	}
	for _, a := range []struct{ flag, env, addr string }{
		{"metrics-addr", "METRICS_ADDR", o.MetricsAddr},
		{"health-addr", "HEALTH_ADDR", o.HealthAddr},
		{"pprof-addr", "PPROF_ADDR", o.PprofAddr},
		{"reloader-addr", "RELOADER_ADDR", o.ReloaderAddr},
	} {
		if err := checkAddr(a.addr); err != nil {
			p.add(a.flag, a.env, `want host:port, :port or "0": %v`, err)
		}
	}
	for _, k := range o.IgnoreWorkloadKinds {
		if _, ok := workload.ByName(k); !ok {
			p.add("ignore-workload-kinds", "IGNORE_WORKLOAD_KINDS", "%q is no workload kind (want kind names such as CronJob)", k)
		}
	}
	for _, d := range []struct {
		flag, env string
		v         time.Duration
	}{{"settle", "SETTLE", o.Settle}, {"settle-max", "SETTLE_MAX", o.SettleMax}} {
		if d.v < 0 || d.v > optin.MaxSettle {
			p.add(d.flag, d.env, "want a duration from 0s to %s, got %s", optin.MaxSettle, d.v)
		}
	}
	if o.Namespace != "" {
		if msgs := validation.IsDNS1123Label(o.Namespace); len(msgs) > 0 {
			p.add("lease-namespace", "POD_NAMESPACE, else RELOADER_NAMESPACE", "%q is not a namespace name: %s", o.Namespace, msgs[0])
		}
	}
	if msgs := validation.IsDNS1123Subdomain(o.HashKeySecret); len(msgs) > 0 {
		p.add("hash-key-secret", "HASH_KEY_SECRET", "%q is not a Secret name: %s", o.HashKeySecret, msgs[0])
	}
	if l := o.Lease; l.RetryPeriod <= 0 || l.RetryPeriod >= l.RenewDeadline || l.RenewDeadline >= l.Duration {
		p.add("lease-duration", "LEASE_DURATION", "want 0 < retry period (%s) < renew deadline (%s) < lease duration (%s)", l.RetryPeriod, l.RenewDeadline, l.Duration)
	}
	if msgs := validation.IsDNS1123Subdomain(o.Lease.Name); len(msgs) > 0 {
		p.add("lease-name", "LEASE_NAME", "%q is not a Lease name: %s", o.Lease.Name, msgs[0])
	}
	if o.CacheSyncTimeout <= 0 {
		p.add("cache-sync-timeout", "CACHE_SYNC_TIMEOUT", "want a duration greater than 0, such as 10m")
	}
	p = append(p, o.validateStorms()...)
	o.validateAlerts(&p)
	return p
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
