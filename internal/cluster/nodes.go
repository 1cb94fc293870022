package cluster

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Per-Node capacity besides pods: generous, so that scheduling is limited
// only by PodsPerNode.
const (
	nodeCPU    = "32"
	nodeMemory = "256Gi"
)

// nodeName names the i-th kwok Node.
func nodeName(i int) string { return "kwok-node-" + strconv.Itoa(i) }

// startNodes creates opts.Nodes Nodes for kwok, now that it runs, and waits
// until each is Ready and untainted.
func (c *Cluster) startNodes(ctx context.Context, kwok *Process, opts Options) error {
	began := time.Now()
	client, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		return fmt.Errorf("create nodes: %w", err)
	}
	for i := range opts.Nodes {
		node := newNode(nodeName(i), opts.PodsPerNode)
		if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create node %s: %w", node.Name, err)
		}
	}
	if err := kwok.WaitReady(ctx, componentTimeout, nodesReady(client, opts.Nodes)); err != nil {
		return fmt.Errorf("start nodes: %w", err)
	}
	logr.FromContextOrDiscard(ctx).Info("Nodes ready", "nodes", opts.Nodes,
		"duration", time.Since(began).Round(time.Millisecond).String())
	return nil
}

// newNode returns a Node that kwok manages: no taints, and a status that
// kwok's node-initialize stage completes (conditions, addresses, Ready).
func newNode(name string, pods int) *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(nodeCPU),
		corev1.ResourceMemory: resource.MustParse(nodeMemory),
		corev1.ResourcePods:   *resource.NewQuantity(int64(pods), resource.DecimalSI),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{kwokNodeAnnotation: "fake"},
			Labels: map[string]string{
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
				"type":                   "kwok",
			},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
}

// nodesReady returns a check that wants n Nodes, each Ready with no taints.
// (kube-apiserver runs without the TaintNodesByCondition admission plugin,
// which would taint every new Node not-ready, for good: no node-lifecycle
// controller runs to take the taint off.)
func nodesReady(client kubernetes.Interface, n int) func(context.Context) error {
	return func(ctx context.Context) error {
		nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(nodes.Items) < n {
			return fmt.Errorf("%d of %d nodes exist", len(nodes.Items), n)
		}
		for _, node := range nodes.Items {
			if len(node.Spec.Taints) > 0 {
				return fmt.Errorf("node %s has taints %v", node.Name, node.Spec.Taints)
			}
			if !isReady(&node) {
				return fmt.Errorf("node %s is not Ready", node.Name)
			}
		}
		return nil
	}
}

func isReady(node *corev1.Node) bool {
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}
