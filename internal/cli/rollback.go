package cli

// The revisions of a workload (read by history and rollback), and watcher
// rollback, which brings back the config of one revision of a workload
// that pins its config, keeping its current image. It sends one JSON merge
// patch of the workload's pod template: the pins annotation and its
// signature set to that revision's (on the condition that the workload is
// still as read), and nothing else. Before it, the workload is made an
// owner of each snapshot it will pin (keepSnapshots). The workload's controller then rolls a new revision with
// the current image and the old config, and the running watcher records
// it as a rollback (Event RolledBack), as it does kubectl rollout undo.
//
//	revision N                            rollback
//	not among the workload's revisions    refused
//	pins nothing                          refused: nothing to bring back
//	names a snapshot that is gone         refused: its pods could not start
//	pins what the template pins now       nothing to do
//	otherwise                             the patch (--dry-run: sent as a dry run)

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/pin"
	"github.com/watcher-dev/watcher/internal/snapshot"
	"github.com/watcher-dev/watcher/internal/workload"
)

// revisionCommand is one run of watcher history or watcher rollback.
type revisionCommand struct {
	prog, name string
	stderr     io.Writer
	flags      *pflag.FlagSet
	rules      *clientcmd.ClientConfigLoadingRules
	overrides  clientcmd.ConfigOverrides
	// output is -o (history); to is --to-revision, dryRun --dry-run
	// (rollback).
	output string
	to     int64
	dryRun bool
}

func newRevisionCommand(prog, name string, stderr io.Writer) *revisionCommand {
	c := &revisionCommand{prog: prog, name: name, stderr: stderr, rules: clientcmd.NewDefaultClientConfigLoadingRules()}
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.rules.ExplicitPath, "kubeconfig", "", "path to a kubeconfig; none: $KUBECONFIG, then ~/.kube/config")
	clientcmd.BindOverrideFlags(&c.overrides, fs, clientcmd.RecommendedConfigOverrideFlags(""))
	if name == cmdHistory {
		fs.StringVarP(&c.output, "output", "o", "text", "output format: text or json")
	} else {
		fs.Int64Var(&c.to, "to-revision", 0, "the revision whose config to bring back (watcher history lists them)")
		fs.BoolVar(&c.dryRun, "dry-run", false, "send the patch as a dry run: the API server checks it, nothing changes")
	}
	fs.Usage = func() {
		if name == cmdHistory {
			fmt.Fprintf(stderr, "Usage: %s history KIND/NAME [-n NAMESPACE] [-o text|json] [flags]\n\n"+
				"The revisions of a workload that pins its config (Deployment, StatefulSet,\n"+
				"DaemonSet, Rollout), newest first: per revision its images and, per pinned\n"+
				"ConfigMap or Secret, the snapshot's digest, the keys changed against the\n"+
				"revision before, who changed them and when. Snapshots are compared in memory;\n"+
				"only key names are printed, never a value.\n\nFlags:\n%s", prog, fs.FlagUsages())
			return
		}
		fmt.Fprintf(stderr, "Usage: %s rollback KIND/NAME --to-revision N [-n NAMESPACE] [--dry-run] [flags]\n\n"+
			"Brings back the config of revision N (watcher history lists them) and keeps the\n"+
			"current image: one patch sets the pod template's %s to revision N's.\n"+
			"The workload's controller rolls a new revision; watcher records it as a\n"+
			"rollback (Event RolledBack). Refused when revision N pins nothing or a\n"+
			"snapshot it pins is gone.\n\nFlags:\n%s", prog, pin.PinsAnnotation, fs.FlagUsages())
	}
	c.flags = fs
	return c
}

// runRevisionCommand runs watcher history or rollback with args; it
// returns the exit code.
func runRevisionCommand(ctx context.Context, prog, name string, args []string, stdout, stderr io.Writer) int {
	c := newRevisionCommand(prog, name, stderr)
	err := c.flags.Parse(args)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	switch {
	case err != nil:
	case c.flags.NArg() != 1:
		err = errors.New("want one KIND/NAME, such as deployment/web")
	case name == cmdHistory && c.output != "text" && c.output != "json":
		err = fmt.Errorf("invalid --output %q: want text, json", c.output)
	case name == cmdRollback && c.to <= 0:
		err = errors.New("want --to-revision N, a revision watcher history lists")
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s %s: %v\nRun '%s %s --help' for the flags.\n", prog, name, err, prog, name)
		return 2
	}
	if err := c.run(ctx, stdout); err != nil {
		fmt.Fprintf(stderr, "%s %s: %v\n", prog, name, err)
		return 1
	}
	return 0
}

func (c *revisionCommand) run(ctx context.Context, out io.Writer) error {
	r, err := connect(c.rules, &c.overrides, c.name)
	if err != nil {
		return err
	}
	if c.name == cmdHistory {
		h, err := r.readHistory(ctx, c.flags.Arg(0))
		if err != nil {
			return err
		}
		if c.output == "json" {
			enc := json.NewEncoder(out)
			enc.SetIndent("", "  ")
			return enc.Encode(h)
		}
		return h.WriteText(out)
	}
	done, err := r.rollback(ctx, c.flags.Arg(0), c.to, c.dryRun)
	if err != nil {
		return err
	}
	_, err = fmt.Fprint(out, done)
	return err
}

// rollbackTarget picks revision n among revs, or says why its config
// cannot be brought back (gone names the snapshots that are gone).
func rollbackTarget(revs []revision, n int64, gone func(pin.Source, string) bool) (revision, error) {
	i := slices.IndexFunc(revs, func(r revision) bool { return r.Number == n })
	if i < 0 {
		var have []string
		for _, r := range revs {
			have = append(have, fmt.Sprint(r.Number))
		}
		return revision{}, fmt.Errorf("no revision %d: the revisions kept are %s", n, strings.Join(have, ", "))
	}
	rev := revs[i]
	pins := rev.pins()
	if len(pins) == 0 {
		return revision{}, fmt.Errorf("revision %d pins nothing (made before the workload was pinned, or by a restart without pinning): it has no config of its own to bring back; kubectl rollout undo brings back its whole template", n)
	}
	var missing []string
	for _, src := range sortedSources(pins) {
		if gone(src, pins[src]) {
			missing = append(missing, src.String()+"="+pins[src])
		}
	}
	if len(missing) > 0 {
		return revision{}, fmt.Errorf("revision %d pins snapshots that are gone (%s): its pods could not start", n, strings.Join(missing, ", "))
	}
	return rev, nil
}

// rollbackPatch is the JSON merge patch that sets the pins of a workload's
// pod template to pins, on the condition that the workload is still at
// resourceVersion.
func rollbackPatch(resourceVersion string, pins pin.Pins, mac string) ([]byte, error) {
	ann := map[string]any{pin.PinsAnnotation: pins.String(), pin.SignatureAnnotation: nil}
	if mac != "" {
		ann[pin.SignatureAnnotation] = mac
	}
	return json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": resourceVersion},
		"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{
			"annotations": ann}}},
	})
}

// keepSnapshots makes obj an owner of each snapshot pins names, as a
// restart that reuses a snapshot does, before its template pins them:
// until the revision the rollback makes owns them (snapshot.Owners), the
// revision that pinned them may be deleted (revisionHistoryLimit) and
// Kubernetes' garbage collector would take them with it. opts are a dry
// run's: the API server checks the patches (the right to make them).
func (r *reader) keepSnapshots(ctx context.Context, kind workload.Kind, obj client.Object, pins pin.Pins, opts ...client.PatchOption) error {
	ref := metav1.OwnerReference{APIVersion: kind.APIVersion(), Kind: kind.Name(), Name: obj.GetName(), UID: obj.GetUID()}
	for _, src := range pin.Sorted(pins) {
		snap := snapshotMeta(src) // its owners only: a Secret's values are not the rollback's
		key := types.NamespacedName{Namespace: obj.GetNamespace(), Name: pins[src]}
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := r.c.Get(ctx, key, snap); err != nil {
				return err
			}
			owners, changed := pin.Owned(snap.GetOwnerReferences(), ref)
			if !changed {
				return nil
			}
			return snapshot.PatchOwners(ctx, r.c, snap, owners, opts...)
		})
		if err != nil {
			return fmt.Errorf("keep snapshot %s %s (the rollback makes %s an owner of the snapshots it pins, "+
				"so that they outlive the revision that pinned them): %w", src.Kind, key, obj.GetName(), err)
		}
	}
	return nil
}

// rollback brings back the config of revision n of the workload named by
// arg, and says what it did. The patch is conditional on the workload read:
// when it changed meanwhile (its controller writes its status during a
// rollout), everything is read and decided again.
func (r *reader) rollback(ctx context.Context, arg string, n int64, dryRun bool) (string, error) {
	var done string
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		var err error
		done, err = r.rollbackOnce(ctx, arg, n, dryRun)
		return err
	})
	return done, err
}

// rollbackOnce reads, decides and patches once.
func (r *reader) rollbackOnce(ctx context.Context, arg string, n int64, dryRun bool) (string, error) {
	kind, obj, err := r.pinnable(ctx, arg)
	if err != nil {
		return "", err
	}
	revs, err := r.revisions(ctx, kind, obj)
	if err != nil {
		return "", err
	}
	var readErr error
	rev, err := rollbackTarget(revs, n, func(src pin.Source, name string) bool {
		gone, err := r.snapshotGone(ctx, obj.GetNamespace(), src, name)
		readErr = errors.Join(readErr, err)
		return gone
	})
	if readErr != nil {
		return "", readErr
	}
	if err != nil {
		return "", err
	}
	tmpl, err := kind.PodTemplate(obj)
	if err != nil {
		return "", err
	}
	id := fmt.Sprintf("%s %s/%s", kind.Name(), obj.GetNamespace(), obj.GetName())
	pins := rev.pins()
	if pin.Parse(tmpl.Annotations[pin.PinsAnnotation]).String() == pins.String() {
		return fmt.Sprintf("%s already pins the config of revision %d (%s): nothing to do\n", id, n, pins), nil
	}
	patch, err := rollbackPatch(obj.GetResourceVersion(), pins, rev.Template.Annotations[pin.SignatureAnnotation])
	if err != nil {
		return "", err
	}
	var opts []client.PatchOption
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	if err := r.keepSnapshots(ctx, kind, obj, pins, opts...); err != nil {
		return "", err
	}
	if err := r.c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch), opts...); err != nil {
		return "", fmt.Errorf("patch %s: %w", id, err) // a conflict is tried again
	}
	return rollbackText(id, n, pins, images(tmpl.Spec), dryRun, kind), nil
}

// rollbackText says what rollback did.
func rollbackText(id string, n int64, pins pin.Pins, imgs []string, dryRun bool, kind workload.Kind) string {
	var b strings.Builder
	verb := "pins"
	if dryRun {
		verb = "would pin (dry run: nothing changed)"
	}
	fmt.Fprintf(&b, "%s %s the config of revision %d, keeping its image (%s):\n", id, verb, n, strings.Join(imgs, ", "))
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, src := range sortedSources(pins) {
		fmt.Fprintf(tw, "  %s\tsnapshot %s\n", src, pins[src])
	}
	_ = tw.Flush() // a strings.Builder does not fail
	if !dryRun {
		rolls := "the deployment controller rolls a new ReplicaSet"
		switch kind.Name() {
		case workload.Rollout.Name():
			rolls = "Argo Rollouts rolls a new ReplicaSet"
		case workload.StatefulSet.Name(), workload.DaemonSet.Name():
			rolls = "its controller rolls a new revision (as its update strategy says)"
		}
		fmt.Fprintf(&b, "Next: %s with it; watcher records the rollback (Event RolledBack) and does not roll forward until a new content arrives.\n", rolls)
	}
	return b.String()
}

// snapshotGone tells whether the snapshot name of src is not there; only
// its metadata is read.
func (r *reader) snapshotGone(ctx context.Context, ns string, src pin.Source, name string) (bool, error) {
	obj := snapshotMeta(src)
	err := r.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj)
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("get snapshot %s %s/%s: %w", src.Kind, ns, name, err)
	}
	// Something else of that name is no snapshot of src: as gone.
	return obj.GetLabels()[pin.SnapshotLabel] != "true" || obj.GetAnnotations()[pin.SnapshotOf] != src.String(), nil
}

// snapshotMeta is the metadata of a snapshot of src, to read into.
func snapshotMeta(src pin.Source) *metav1.PartialObjectMetadata {
	kind := "ConfigMap"
	if src.Kind == pin.Secret {
		kind = "Secret"
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
	return obj
}

// The annotations holding the revision number of a ReplicaSet.
const (
	deploymentRevision = "deployment.kubernetes.io/revision"
	rolloutRevision    = "rollout.argoproj.io/revision"
)

// revision is one revision of a workload, as its ReplicaSet or
// ControllerRevision keeps its pod template.
type revision struct {
	Number int64
	// Object names the ReplicaSet or ControllerRevision ("ReplicaSet web-7d9f").
	Object   string
	Created  time.Time
	Template corev1.PodTemplateSpec
}

// pins returns the pins of the revision's template.
func (r revision) pins() pin.Pins { return pin.Parse(r.Template.Annotations[pin.PinsAnnotation]) }

// sortRevisions sorts revs newest first: by number, then by creation.
func sortRevisions(revs []revision) {
	slices.SortStableFunc(revs, func(a, b revision) int {
		return cmp.Or(cmp.Compare(b.Number, a.Number), b.Created.Compare(a.Created))
	})
}

// revisions reads the revisions of obj, a workload of kind, newest first:
// the ReplicaSets it controls (Deployment, Argo Rollout) or its
// ControllerRevisions (StatefulSet, DaemonSet).
func (r *reader) revisions(ctx context.Context, kind workload.Kind, obj client.Object) ([]revision, error) {
	var out []revision
	switch kind.Name() {
	case workload.Deployment.Name(), workload.Rollout.Name():
		key := deploymentRevision
		if kind.Name() == workload.Rollout.Name() {
			key = rolloutRevision
		}
		var list appsv1.ReplicaSetList
		if err := r.c.List(ctx, &list, client.InNamespace(obj.GetNamespace())); err != nil {
			return nil, fmt.Errorf("list replicasets of %s: %w", obj.GetNamespace(), err)
		}
		for _, rs := range list.Items {
			if !controlledBy(&rs, obj) {
				continue
			}
			n, _ := strconv.ParseInt(rs.Annotations[key], 10, 64)
			out = append(out, revision{Number: n, Object: "ReplicaSet " + rs.Name, Created: rs.CreationTimestamp.Time, Template: rs.Spec.Template})
		}
	case workload.StatefulSet.Name(), workload.DaemonSet.Name():
		var list appsv1.ControllerRevisionList
		if err := r.c.List(ctx, &list, client.InNamespace(obj.GetNamespace())); err != nil {
			return nil, fmt.Errorf("list controllerrevisions of %s: %w", obj.GetNamespace(), err)
		}
		for _, cr := range list.Items {
			if !controlledBy(&cr, obj) {
				continue
			}
			// The data is a patch of the workload: its whole template.
			var patch struct {
				Spec struct {
					Template corev1.PodTemplateSpec `json:"template"`
				} `json:"spec"`
			}
			if err := json.Unmarshal(cr.Data.Raw, &patch); err != nil {
				return nil, fmt.Errorf("read controllerrevision %s/%s: %w", cr.Namespace, cr.Name, err)
			}
			out = append(out, revision{Number: cr.Revision, Object: "ControllerRevision " + cr.Name, Created: cr.CreationTimestamp.Time, Template: patch.Spec.Template})
		}
	default:
		return nil, fmt.Errorf("a %s keeps no revisions of its pod template: only Deployments, StatefulSets, DaemonSets and Rollouts pin their config", kind.Name())
	}
	sortRevisions(out)
	return out, nil
}

// controlledBy tells whether owner is the controller of obj.
func controlledBy(obj metav1.Object, owner client.Object) bool {
	c := metav1.GetControllerOf(obj)
	return c != nil && c.UID == owner.GetUID()
}

// pinnable reads the workload named by arg ("deployment/web") of r's
// namespace.
func (r *reader) pinnable(ctx context.Context, arg string) (workload.Kind, client.Object, error) {
	t, name, err := parseTarget(arg)
	if err != nil {
		return workload.Kind{}, nil, err
	}
	if t.config != "" || !t.workload.Pinnable {
		return workload.Kind{}, nil, fmt.Errorf("%s: want a Deployment, StatefulSet, DaemonSet or Rollout (the kinds whose revisions keep their config)", arg)
	}
	obj := t.workload.New()
	if err := r.c.Get(ctx, types.NamespacedName{Namespace: r.namespace, Name: name}, obj); err != nil {
		return workload.Kind{}, nil, fmt.Errorf("get %s %s/%s: %w", t.workload.Name(), r.namespace, name, err)
	}
	obj.GetObjectKind().SetGroupVersionKind(t.workload.GVK)
	return t.workload, obj, nil
}
