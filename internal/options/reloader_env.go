package options

// applyDeploymentEnv reads the variables that Stakater Reloader's chart
// sets in Reloader's Deployment, in every mode, where watcher's own
// setting is given neither on the command line nor in the environment:
//
//	KUBERNETES_NAMESPACE               watch that namespace alone
//	                                   (--namespaces), unless --namespaces
//	                                   or NAMESPACES is given
//	RELOADER_NAMESPACE                 watcher's own namespace (Lease, hash
//	                                   key Secret, settings ConfigMap),
//	                                   unless --lease-namespace or
//	                                   POD_NAMESPACE; --reloader-addr :9090
//	METRICS_COUNT_BY_NAMESPACE=enabled --metrics-by-namespace
//
// RELOADER_DEPLOYMENT_NAME, POD_NAME, GOMAXPROCS and GOMEMLIMIT need
// nothing: the Go runtime reads the last two itself.
func (o *Options) applyDeploymentEnv(src origin) {
	if ns, ok := src.env("KUBERNETES_NAMESPACE"); ok && !src.given("namespaces") {
		o.Namespaces = []string{ns}
		o.note("KUBERNETES_NAMESPACE: watching namespace %s alone, as Reloader (--namespaces or NAMESPACES would win)", ns)
	}
	if ns, ok := src.env("RELOADER_NAMESPACE"); ok {
		if !src.given("lease-namespace") {
			o.Namespace = ns
		}
		if !src.given("reloader-addr") {
			o.ReloaderAddr = ":9090"
		}
	}
	if v, ok := src.getenv("METRICS_COUNT_BY_NAMESPACE"); ok && !src.given("metrics-by-namespace") {
		o.MetricsByNamespace = v == "enabled"
	}
}
