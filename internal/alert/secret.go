package alert

import (
	"context"
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	corev1informers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
)

// SecretRef names a key of a Secret: "namespace/name:key".
type SecretRef struct {
	Namespace, Name, Key string
}

// ParseSecretRef reads "namespace/name:key".
func ParseSecretRef(s string) (SecretRef, error) {
	nsName, key, ok := strings.Cut(s, ":")
	ns, name, ok2 := strings.Cut(nsName, "/")
	if !ok || !ok2 || ns == "" || name == "" || key == "" {
		return SecretRef{}, fmt.Errorf("want namespace/name:key, such as watcher/alerts:url")
	}
	return SecretRef{ns, name, key}, nil
}

// String returns "namespace/name:key".
func (r SecretRef) String() string { return r.Namespace + "/" + r.Name + ":" + r.Key }

// URLFromSecret keeps a Sender's URL equal to a key of a Secret: read when
// it starts and whenever the Secret changes, through an informer that
// lists and watches that one Secret. The value is never logged. It is a
// manager.Runnable, on every replica.
type URLFromSecret struct {
	Client kubernetes.Interface
	Ref    SecretRef
	Sender *Sender
	Log    logr.Logger
}

// NeedLeaderElection is false: every replica may send.
func (u *URLFromSecret) NeedLeaderElection() bool { return false }

// Start watches the Secret until ctx is done.
func (u *URLFromSecret) Start(ctx context.Context) error {
	inf := corev1informers.NewFilteredSecretInformer(u.Client, u.Ref.Namespace, 0, toolscache.Indexers{}, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", u.Ref.Name).String()
	})
	set := func(obj any) {
		s, ok := obj.(*corev1.Secret)
		if !ok {
			return
		}
		v, found := s.Data[u.Ref.Key]
		if !found {
			u.Log.Error(nil, "Alert webhook URL Secret has no such key; alerts are not sent", "secret", u.Ref.String())
		} else {
			u.Log.Info("Alert webhook URL read from its Secret", "secret", u.Ref.String())
		}
		u.Sender.SetURL(strings.TrimSpace(string(v)))
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, cur any) { set(cur) },
		DeleteFunc: func(any) {
			u.Log.Error(nil, "Alert webhook URL Secret deleted; alerts are not sent", "secret", u.Ref.String())
			u.Sender.SetURL("")
		},
	}); err != nil {
		return fmt.Errorf("watch alert URL Secret: %w", err)
	}
	go inf.RunWithContext(ctx)
	if toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) && len(inf.GetStore().ListKeys()) == 0 {
		u.Log.Error(nil, "Alert webhook URL Secret not found; alerts are not sent until it is created", "secret", u.Ref.String())
		u.Sender.SetURL("")
	}
	<-ctx.Done()
	return nil
}
