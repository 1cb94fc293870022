package app

import (
	"context"
	"slices"

	"github.com/go-logr/logr"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/options"
	"github.com/watcher-dev/watcher/internal/workload"
)

// ignoreJobsUnlessAllowed adds Job to the ignored workload kinds when
// watcher may not list and watch Jobs in the namespaces it watches (asked
// with SelfSubjectAccessReviews). Jobs became a workload kind after
// installations whose RBAC grants nothing on them: such an installation
// keeps running as before, without Jobs, instead of waiting forever for
// an informer it may not fill. A review that fails says nothing: Jobs are
// watched.
func ignoreJobsUnlessAllowed(ctx context.Context, cfg *rest.Config, o *options.Options, log logr.Logger) {
	if slices.Contains(o.IgnoreWorkloadKinds, workload.Job.Name()) {
		return
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return
	}
	namespaces := object.Namespaces(o.Namespaces)
	for _, ns := range namespaces {
		for _, verb := range []string{"list", "watch"} {
			review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: "batch", Resource: "jobs"},
			}}
			got, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
			if err != nil {
				log.V(1).Info("Cannot tell whether Jobs may be watched; watching them", "error", err.Error())
				return
			}
			if !got.Status.Allowed {
				o.IgnoreWorkloadKinds = append(o.IgnoreWorkloadKinds, workload.Job.Name())
				log.Info("Jobs are neither watched nor restarted: no right to list and watch them",
					"namespace", ns, "verb", verb, "grant", "get, list, watch, patch, create and delete on jobs (batch)")
				return
			}
		}
	}
}
