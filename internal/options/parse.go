package options

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/watcher-dev/watcher/internal/envflag"
)

// ErrHelp is returned by Parse when --help was asked for.
var ErrHelp = pflag.ErrHelp

// Parse returns the options set by args and, for flags not on the command
// line, by the environment (getenv, usually os.LookupEnv). Errors name the
// flag or variable and the expected form; they never echo a password.
//
// Stakater Reloader's flags are read as well (see reloaderFlags): a flag on
// the command line, watcher's or Reloader's, wins over every environment
// variable, and a Reloader flag gives way only to watcher's own flag for
// the same setting on the command line. Each variable so overridden is
// named in Options.Notes. The variables of Reloader's own Deployment
// (RELOADER_NAMESPACE, KUBERNETES_NAMESPACE, METRICS_COUNT_BY_NAMESPACE)
// are read too (see applyDeploymentEnv).
//
// The Redis settings (REDIS_*, DB, USERNAME, PASSWORD,
// LOCK_EXPIRATION_TIME and their flags) are checked only in the redis lock
// mode. In the other modes an invalid one is ignored and reported in
// Options.Notes: Kubernetes sets REDIS_PORT=tcp://10.0.0.1:6379 in every pod
// of a namespace that holds a Service named redis, and that must not stop a
// watcher that does not use Redis.
func Parse(args []string, getenv func(string) (string, bool), usageOut io.Writer) (*Options, error) {
	o := Defaults()
	fs := pflag.NewFlagSet("watcher", pflag.ContinueOnError)
	fs.SetOutput(usageOut)
	fs.Usage = func() { Usage(usageOut, fs) }
	o.BindFlags(fs)
	reloader := bindReloader(fs)
	var errs, redisErrs []error
	args, notes := joinBoolValues(fs, args)
	if err := parseArgs(fs, args, &redisErrs); err != nil {
		return nil, err
	}
	o.Notes = append(o.Notes, notes...)
	src := origin{fs: fs, fromEnv: map[string]string{}, getenv: getenv}
	fs.VisitAll(func(f *pflag.Flag) {
		env := f.Annotations[envflag.EnvAnnotation]
		if len(env) == 0 || src.onCommandLine(f) {
			return
		}
		if v, ok := getenv(env[0]); ok {
			src.fromEnv[f.Name] = env[0]
			if err := f.Value.Set(v); err != nil {
				err = fmt.Errorf("invalid %s%s: %w", env[0], shown(f.Value, v), err)
				if isRedis(f) {
					redisErrs = append(redisErrs, err)
				} else {
					errs = append(errs, err)
				}
			}
		}
	})
	// Existing deployments of this design set only the Redis variables.
	if _, lockSet := getenv("LOCK_BACKEND"); !lockSet && !fs.Changed("lock") {
		if _, ok := getenv("REDIS_HOST"); ok || fs.Changed("redis-host") {
			o.Lock = LockRedis
		}
	}
	o.applyDeploymentEnv(src)
	if err := o.applyReloader(reloader, src); err != nil {
		errs = append(errs, err)
	}
	redisErrs = append(redisErrs, o.validateRedis()...)
	if o.Lock == LockRedis {
		errs = append(errs, redisErrs...)
		o.Notes = append(o.Notes, fs.Lookup("redis-port").Value.(*redisPort).notes()...)
	} else {
		for _, err := range redisErrs {
			o.Notes = append(o.Notes, fmt.Sprintf("ignored, as the lock mode %s uses no Redis: %v", o.Lock, err))
		}
	}
	if err := errors.Join(append(errs, o.validate()...)...); err != nil {
		return nil, err
	}
	return o, nil
}

// parseArgs parses the command line. An invalid value of a Redis flag is
// added to redisErrs instead of failing, as Parse decides later whether it
// matters.
func parseArgs(fs *pflag.FlagSet, args []string, redisErrs *[]error) error {
	var wrapped []*pflag.Flag
	fs.VisitAll(func(f *pflag.Flag) {
		if isRedis(f) {
			f.Value = deferred{Value: f.Value, flag: f.Name, errs: redisErrs}
			wrapped = append(wrapped, f)
		}
	})
	defer func() {
		for _, f := range wrapped {
			f.Value = f.Value.(deferred).Value
		}
	}()
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// deferred is a flag value whose invalid values are recorded rather than
// returned.
type deferred struct {
	pflag.Value
	flag string
	errs *[]error
}

func (d deferred) Set(v string) error {
	if err := d.Value.Set(v); err != nil {
		*d.errs = append(*d.errs, fmt.Errorf("invalid --%s%s: %w", d.flag, shown(d.Value, v), err))
	}
	return nil
}

// isRedis tells the settings only the redis lock mode uses.
func isRedis(f *pflag.Flag) bool { return len(f.Annotations[redisAnnotation]) > 0 }

// shown quotes s for an error message, unless the value is a secret.
func shown(v pflag.Value, s string) string {
	if envflag.IsSecret(v) {
		return ""
	}
	return fmt.Sprintf(" %q", s)
}

// Usage prints watcher's help: every flag with its environment variable and
// default.
func Usage(w io.Writer, fs *pflag.FlagSet) {
	fmt.Fprint(w, "Usage: watcher [flags]\n\n"+
		"watcher restarts the workloads (Deployments, StatefulSets, DaemonSets,\n"+
		"CronJobs, Argo Rollouts; Jobs that opt in, re-created) that use a\n"+
		"ConfigMap or Secret when the data they read changes, found from their\n"+
		"pod specs with no annotation needed,\n"+
		"behind restart guards (debounce, budget, flap hold, rollout waves) and\n"+
		"ReloadPolicies; it reads Stakater Reloader's annotations too.\n\n"+
		"Commands: watcher explain, watcher graph (what watcher would do and why,\n"+
		"with the settings the running controller publishes), watcher key derive,\n"+
		"watcher migrate (what switching from a running Reloader Deployment changes).\n"+
		"Run `watcher explain --help` for theirs.\n\n"+
		"Every flag can also be set through the environment variable shown;\n"+
		"the command line wins over the environment.\n\nFlags:\n")
	var reloader []string
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			if len(f.Annotations[reloaderAnnotation]) > 0 {
				reloader = append(reloader, "--"+f.Name)
			}
			return
		}
		env := "KUBECONFIG"
		if e := f.Annotations[envflag.EnvAnnotation]; len(e) > 0 {
			env = e[0]
		}
		def := f.DefValue
		if envflag.IsSecret(f.Value) || def == "" {
			def = "none"
		}
		fmt.Fprintf(w, "  --%s %s\n        env %s, default %s\n        %s\n", f.Name, f.Value.Type(), env, def, f.Usage)
	})
	if len(reloader) > 0 {
		fmt.Fprintf(w, "\nStakater Reloader's flags are accepted too, with Reloader's meaning mapped onto\n"+
			"the settings above (docs/reloader.md): %s.\n", strings.Join(reloader, ", "))
	}
}
