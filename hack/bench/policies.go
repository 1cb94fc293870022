package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// policyResource is the API resource of ReloadPolicies.
var policyResource = schema.GroupVersionResource{Group: "watcher.dev", Version: "v1alpha1", Resource: "reloadpolicies"}

// createPolicies installs the ReloadPolicy CRD of deploy/crds and creates
// s.Policies policies in the benchmark's namespace (the many-policies
// scenario): each with s.PolicyTargets Deployment targets by selector, 26
// distinct selectors in all, none of which selects a workload of the
// benchmark, and one source by name that does not exist. They change
// nothing the benchmark counts; they weigh on every workload event of the
// namespace, and their status is looked at again until the source
// appears.
func createPolicies(ctx context.Context, cfg *rest.Config, s Scenario, log *progress) error {
	if s.Policies == 0 {
		return nil
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join("deploy", "crds")}, ErrorIfPathMissing: true,
	}); err != nil {
		return fmt.Errorf("install the ReloadPolicy CRD: %w", err)
	}
	fast := rest.CopyConfig(cfg)
	fast.QPS, fast.Burst = 500, 1000
	dc, err := dynamic.NewForConfig(fast)
	if err != nil {
		return fmt.Errorf("create dynamic client: %w", err)
	}
	client := dc.Resource(policyResource).Namespace(namespace)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, createParallelism)
	for range createParallelism {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < s.Policies && ctx.Err() == nil; i = int(next.Add(1) - 1) {
				if _, err := client.Create(ctx, benchPolicy(i, s.PolicyTargets), metav1.CreateOptions{}); err != nil {
					errs <- fmt.Errorf("create reloadpolicy %d: %w", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	log.printf("created %d ReloadPolicies of %d targets", s.Policies, s.PolicyTargets)
	return nil
}

// benchPolicy returns policy i of the many-policies scenario.
func benchPolicy(i, targets int) *unstructured.Unstructured {
	var ts []any
	for j := range targets {
		ts = append(ts, map[string]any{"kind": "Deployment", "selector": map[string]any{
			"matchLabels": map[string]any{"bench-policy-tier": "t" + strconv.Itoa(j%26)},
		}})
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "watcher.dev/v1alpha1", "kind": "ReloadPolicy",
		"metadata": map[string]any{"name": "policy-" + strconv.Itoa(i), "namespace": namespace},
		"spec": map[string]any{
			"sources": []any{map[string]any{"kind": "ConfigMap", "name": "bench-policy-source"}},
			"targets": ts,
		},
	}}
}

// waitPolicyStatus waits until the controller has written the status of
// every policy of the many-policies scenario (their writes are start-up
// work, not the cost of a change), or for at most timeout. It lists the
// policies once, then follows their changes: listing 2,000 policies of
// 100 targets every few seconds (20 MB each time) would load the API
// server the controller is being measured against.
func waitPolicyStatus(ctx context.Context, cfg *rest.Config, s Scenario, timeout time.Duration, log *progress) error {
	if s.Policies == 0 {
		return nil
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create dynamic client: %w", err)
	}
	client := dc.Resource(policyResource).Namespace(namespace)
	var done atomic.Int64
	stop := log.every(3*time.Second, func() string { return fmt.Sprintf("policy statuses written %d/%d", done.Load(), s.Policies) })
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	written := map[string]bool{}
	note := func(p *unstructured.Unstructured) {
		if conds, _, _ := unstructured.NestedSlice(p.Object, "status", "conditions"); len(conds) > 0 {
			written[p.GetName()] = true
		}
		done.Store(int64(len(written)))
	}
	for len(written) < s.Policies {
		list, err := client.List(ctx, metav1.ListOptions{})
		if err != nil {
			return policyStatusErr(ctx, len(written), s.Policies, timeout, fmt.Errorf("list reloadpolicies: %w", err))
		}
		for i := range list.Items {
			note(&list.Items[i])
		}
		if len(written) >= s.Policies {
			break
		}
		w, err := client.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
		if err != nil {
			return policyStatusErr(ctx, len(written), s.Policies, timeout, fmt.Errorf("watch reloadpolicies: %w", err))
		}
		for e := range w.ResultChan() {
			if p, ok := e.Object.(*unstructured.Unstructured); ok {
				note(p)
			}
			if len(written) >= s.Policies {
				break
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return policyStatusErr(ctx, len(written), s.Policies, timeout, ctx.Err())
		}
	}
	log.printf("the controller wrote the status of every policy")
	return nil
}

// policyStatusErr is the error of waitPolicyStatus: err, or the timeout.
func policyStatusErr(ctx context.Context, n, policies int, timeout time.Duration, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("policy statuses: %d of %d written after %s", n, policies, timeout)
	}
	return err
}
