package install

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/restart"
)

// What deploy/reloader/admissionpolicy.yaml answers for an object that is
// not watcher's.
const (
	imageSwapSecrets    = "watcher may create only its hash key Secret"
	imageSwapConfigMaps = "watcher may create, change and delete only its ConfigMaps"
	imageSwapLeases     = "watcher may create only its Lease"
)

// imageSwapPolicy checks the admission policy of the image swap, applied
// with deploy/reloader's RBAC for Reloader's ServiceAccount ns/sa: in
// Reloader's namespace, the token creates no Secret but watcher's hash key
// (no service-account token Secret), creates, patches and deletes no
// ConfigMap but watcher's (its settings, the records of Job re-creations),
// creates no Lease but watcher's; what watcher itself writes there is
// admitted (the caller checks that watcher was refused nothing). Every
// write is a dry run (the token Secret under the hash key's name, which
// exists, is refused by the policy before the API server finds it taken).
func imageSwapPolicy(t *testing.T, ns, sa string) {
	t.Helper()
	shared := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "coredns"}, Data: map[string]string{"Corefile": "."}}
	if err := k8s.Create(ctx, shared); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, shared) })

	for _, tc := range []struct {
		name string
		obj  client.Object
		want string
	}{
		{"a service-account token Secret", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default-token",
			Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}}, Type: corev1.SecretTypeServiceAccountToken}, imageSwapSecrets},
		{"a token Secret under the hash key's name", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "watcher-hash-key",
			Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}}, Type: corev1.SecretTypeServiceAccountToken}, imageSwapSecrets},
		{"another Opaque Secret", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"}}, imageSwapSecrets},
		{"another ConfigMap", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "aws-auth"}}, imageSwapConfigMaps},
		{"a ConfigMap named as a record, but not one", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "watcher-recreate-x"}}, imageSwapConfigMaps},
		{"another Lease", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kube-scheduler"}}, imageSwapLeases},
	} {
		t.Run("refused: "+tc.name, func(t *testing.T) { refused(t, ns, sa, tc.obj, tc.want) })
	}

	c := as(t, ns, sa)
	t.Run("refused: a patch of another ConfigMap", func(t *testing.T) {
		patch := client.RawPatch(types.MergePatchType, []byte(`{"data":{"Corefile":"x"}}`))
		NewWithT(t).Eventually(func() error {
			return c.Patch(ctx, shared.DeepCopy(), patch, client.DryRunAll)
		}, wait, 200*time.Millisecond).Should(MatchError(ContainSubstring(imageSwapConfigMaps)))
	})
	t.Run("refused: a delete of another ConfigMap", func(t *testing.T) {
		NewWithT(t).Eventually(func() error {
			return c.Delete(ctx, shared.DeepCopy(), client.DryRunAll)
		}, wait, 200*time.Millisecond).Should(MatchError(ContainSubstring(imageSwapConfigMaps)))
	})
	t.Run("admitted: the record of a Job re-creation", func(t *testing.T) {
		record := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: restart.RecordName("apps", "migrate")}}
		NewWithT(t).Expect(c.Create(ctx, record, client.DryRunAll)).To(Succeed())
	})
	t.Run("admitted: another user", func(t *testing.T) {
		other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "aws-auth"}}
		NewWithT(t).Expect(k8s.Create(ctx, other, client.DryRunAll)).To(Succeed())
	})
}
