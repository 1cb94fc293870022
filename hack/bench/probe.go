package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/watcher-dev/watcher/internal/plan"
)

// The install probe (--shared N --install-probe): what adoption would cost
// the cluster with the record kept in each place it could live, measured
// rather than argued. The shared scenario's N Deployments roll out, then,
// one place after the other, the benchmark writes a record of the usual
// size for every Deployment there (no controller runs) and counts every
// user's writes until the cluster is quiet again: its own and the other
// controllers' reactions (the deployment controller's status and
// ReplicaSet writes).

// probePlaces are the places a record can live, in the order measured. Each
// writes under its own key, so that none finds the value of another there
// (the deployment controller copies a Deployment's annotations to its
// ReplicaSet).
var probePlaces = []probePlace{
	{"annotation", "annotations on the workload (watcher today: the record, its version, the hash key's ID)", probeAnnotation},
	{"label", "a label on the workload (a digest of the record: labels hold 63 characters)", probeLabel},
	{"replicaset", "an annotation on the Deployment's current ReplicaSet", probeReplicaSet},
	{"configmap", "records of a namespace's workloads in ConfigMaps of watcher's own (up to 1 MiB each)", probeConfigMap},
}

type probePlace struct {
	Name, What string
	write      func(ctx context.Context, cs kubernetes.Interface, names []string, record string) error
}

// probeResult is what the install probe measures: for each place, the
// writes of every user by "user verb resource".
type probeResult struct {
	Workloads int                       `json:"workloads"`
	Writes    map[string]map[string]int `json:"writes"`
}

func runProbe(ctx context.Context, o options, log *progress) (_ *probeResult, err error) {
	kube, cs, err := startShared(ctx, o, log)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, kube.Stop()) }()
	log.printf("waiting until every Deployment is available")
	if err := pollUntil(ctx, 5*time.Minute, func() (bool, error) { return sharedAvailable(ctx, cs, o) }); err != nil {
		return nil, err
	}
	names := make([]string, o.Shared)
	for i := range names {
		names[i] = workloadName(i)
	}
	// A record of one ConfigMap read whole, as watcher writes it.
	record := plan.Record{"ConfigMap/shared": {All: true, Keys: map[string]string{"ca.crt": strings.Repeat("0", 64)}}}.String()
	r := &probeResult{Workloads: o.Shared, Writes: map[string]map[string]int{}}
	for _, p := range probePlaces {
		if err := sleep(ctx, 5*o.SettleQuiet); err != nil {
			return nil, err
		}
		start := time.Now()
		log.printf("probe %s: %s", p.Name, p.What)
		if err := p.write(ctx, cs, names, record); err != nil {
			return nil, fmt.Errorf("probe %s: %w", p.Name, err)
		}
		if err := sleep(ctx, 5*o.SettleQuiet); err != nil { // the reactions
			return nil, err
		}
		f, err := os.Open(kube.AuditLogPath)
		if err != nil {
			return nil, err
		}
		r.Writes[p.Name], err = countWrites(f, start, time.Now())
		f.Close()
		if err != nil {
			return nil, err
		}
	}
	return r, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func probeLabel(ctx context.Context, cs kubernetes.Interface, names []string, record string) error {
	// A label holds 63 characters: a digest of the record.
	patch := fmt.Sprintf(`{"metadata":{"labels":{"watcher.dev/record":%q}}}`, shortDigest(record))
	return patchEach(ctx, names, func(name string) error {
		_, err := cs.AppsV1().Deployments(benchNamespace).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	})
}

func shortDigest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:16])
}

func probeAnnotation(ctx context.Context, cs kubernetes.Interface, names []string, record string) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q,%q:"probe",%q:"1/probe"}}}`, plan.RecordAnnotation, record, plan.HashKeyAnnotation, plan.VersionAnnotation)
	return patchEach(ctx, names, func(name string) error {
		_, err := cs.AppsV1().Deployments(benchNamespace).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	})
}

func probeReplicaSet(ctx context.Context, cs kubernetes.Interface, names []string, record string) error {
	list, err := cs.AppsV1().ReplicaSets(benchNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	owned := map[string]string{} // Deployment → its ReplicaSet
	for _, rs := range list.Items {
		if ref := metav1.GetControllerOf(&rs); ref != nil && ref.Kind == "Deployment" {
			owned[ref.Name] = rs.Name
		}
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"watcher.dev/replicaset-record":%q}}}`, record)
	return patchEach(ctx, names, func(name string) error {
		rs, ok := owned[name]
		if !ok {
			return fmt.Errorf("no ReplicaSet of %s", name)
		}
		_, err := cs.AppsV1().ReplicaSets(benchNamespace).Patch(ctx, rs, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	})
}

// probeConfigMap writes the records of every workload into as few
// ConfigMaps as hold them, a key per workload.
func probeConfigMap(ctx context.Context, cs kubernetes.Interface, names []string, record string) error {
	const limit = 1 << 20
	var cms []*corev1.ConfigMap
	size := limit
	for _, name := range names {
		if size+len(name)+len(record) > limit-4096 {
			cms = append(cms, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace,
				Name: fmt.Sprintf("watcher-records-%d", len(cms))}, Data: map[string]string{}})
			size = 0
		}
		cms[len(cms)-1].Data["Deployment."+name] = record
		size += len(name) + len(record)
	}
	for _, cm := range cms {
		if _, err := cs.CoreV1().ConfigMaps(benchNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

func patchEach(ctx context.Context, names []string, patch func(name string) error) error {
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := patch(name); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// writeProbe prints, for each place, the writes in all and per workload.
func writeProbe(w io.Writer, r *probeResult) error {
	var b strings.Builder
	fmt.Fprintf(&b, "install probe: a record written for each of %d Deployments (one replica, rolled out), every user's writes (Leases, Events left out)\n", r.Workloads)
	for _, p := range probePlaces {
		writes := r.Writes[p.Name]
		total := 0
		for _, n := range writes {
			total += n
		}
		fmt.Fprintf(&b, "%-10s  %-5d %.2f per workload  (%s)\n", p.Name, total, float64(total)/float64(max(r.Workloads, 1)), p.What)
		keys := make([]string, 0, len(writes))
		for k := range writes {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "  %-70s  %-5d %.2f\n", k, writes[k], float64(writes[k])/float64(max(r.Workloads, 1)))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
