package options

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/homedir"
)

// RESTConfig returns the connection to the Kubernetes API that LocalConfig
// asks for:
//
//	LocalConfig  source
//	True         --kubeconfig, else $KUBECONFIG, else ~/.kube/config
//	False        the in-cluster service account
//	unset        as True when one of those exists, else as False
func (o *Options) RESTConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.Kubeconfig
	home := filepath.Join(homedir.HomeDir(), clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName)
	if os.Getenv(clientcmd.RecommendedConfigPathEnvVar) == "" {
		rules.Precedence = []string{home}
	}
	local := o.LocalConfig
	if local == nil {
		found := o.Kubeconfig != "" || os.Getenv(clientcmd.RecommendedConfigPathEnvVar) != ""
		if _, err := os.Stat(home); err == nil {
			found = true
		}
		local = &found
	}
	var cfg *rest.Config
	var err error
	if *local {
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("load kubeconfig: %w", err)
		}
	} else {
		cfg, err = rest.InClusterConfig()
		if errors.Is(err, rest.ErrNotInCluster) {
			return nil, fmt.Errorf("load in-cluster config: not running in a cluster; set LOCAL_CONFIG=True and a kubeconfig")
		}
		if err != nil {
			return nil, fmt.Errorf("load in-cluster config: %w", err)
		}
	}
	cfg.QPS, cfg.Burst = float32(o.QPS), o.Burst
	cfg.UserAgent = "watcher"
	return cfg, nil
}

// serviceAccountNamespace is where Kubernetes mounts the pod's namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// OwnNamespace returns watcher's own namespace: Namespace if set, else the
// pod's namespace when running in a cluster, else "default".
func (o *Options) OwnNamespace() string {
	if o.Namespace != "" {
		return o.Namespace
	}
	if b, err := os.ReadFile(serviceAccountNamespace); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b))
	}
	return "default"
}
