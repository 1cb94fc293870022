package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
)

// createParallelism is how many objects are created at once: enough to keep
// etcd and kube-apiserver busy on two cores, not so many that they thrash.
const createParallelism = 16

// createAll creates the namespace, then every config, floor config,
// workload and floor workload of s, createParallelism at a time, logging
// progress every few seconds.
func createAll(ctx context.Context, cs kubernetes.Interface, s Scenario, log *progress) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace %s: %w", namespace, err)
	}
	total := s.Configs + s.Workloads + 2*s.FloorPairs()
	var next, done atomic.Int64
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for range createParallelism {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < total && ctx.Err() == nil; i = int(next.Add(1) - 1) {
				if err := create(ctx, cs, s.object(i)); err != nil {
					cancel(err)
					return
				}
				done.Add(1)
			}
		})
	}
	stopTicker := log.every(3*time.Second, func() string {
		return fmt.Sprintf("creating objects %d/%d", done.Load(), total)
	})
	wg.Wait()
	stopTicker()
	if err := context.Cause(ctx); err != nil {
		return err
	}
	log.printf("created %d objects", total)
	return nil
}

// object returns the i-th object to create: configs, floor configs,
// workloads, then floor workloads.
func (s Scenario) object(i int) runtime.Object {
	f := s.FloorPairs()
	switch {
	case i < s.Configs:
		return newConfig(s.IsSecret(i), configName(i), s.Size)
	case i < s.Configs+f:
		i -= s.Configs
		return newConfig(s.IsSecret(i), floorConfigName(i), s.Size)
	case i < s.Configs+f+s.Workloads:
		i -= s.Configs + f
		return newWorkload(workloadName(i), s.workloadRefs(i), i)
	default:
		i -= s.Configs + f + s.Workloads
		return newWorkload(floorName(i), nil, 0)
	}
}

// create creates one object made by newConfig or newWorkload.
func create(ctx context.Context, cs kubernetes.Interface, obj runtime.Object) error {
	var err error
	var name string
	switch o := obj.(type) {
	case *corev1.Secret:
		name = "secret " + o.Name
		_, err = cs.CoreV1().Secrets(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *corev1.ConfigMap:
		name = "configmap " + o.Name
		_, err = cs.CoreV1().ConfigMaps(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *appsv1.Deployment:
		name = "deployment " + o.Name
		_, err = cs.AppsV1().Deployments(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	default:
		return fmt.Errorf("create %T: unknown kind", obj)
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	return nil
}
