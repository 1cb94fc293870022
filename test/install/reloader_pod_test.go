package install

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/watcher-dev/watcher/test/fixture"
)

// reloaderPod runs the watcher binary as the container of Reloader's
// Deployment d would run in its pod: d's args, exactly d's env (each
// valueFrom resolved as the kubelet resolves it for a pod named pod on the
// cluster's one kwok Node), and the kubeconfig given in place of the pod's
// in-cluster config (the only variable added). The process is stopped
// when the test ends.
func reloaderPod(t *testing.T, bin string, d *appsv1.Deployment, pod, kubeconfig string) *proc {
	t.Helper()
	c := d.Spec.Template.Spec.Containers[0]
	env := []string{"KUBECONFIG=" + kubeconfig}
	for _, e := range c.Env {
		env = append(env, e.Name+"="+podEnvValue(t, d.Namespace, pod, c, e))
	}
	cmd := exec.Command(bin, c.Args...)
	cmd.Env = env
	p := &proc{Proc: fixture.Start(t, "watcher", cmd)}
	return p
}

// podEnvValue resolves env var e of container c of pod ns/pod as the
// kubelet does: a value; the pod's namespace or name; a resource limit of
// the container, which is the Node's allocatable amount where the
// container sets no limit, divided by the divisor and rounded up.
func podEnvValue(t *testing.T, ns, pod string, c corev1.Container, e corev1.EnvVar) string {
	t.Helper()
	from := e.ValueFrom
	switch {
	case from == nil:
		return e.Value
	case from.FieldRef != nil && from.FieldRef.FieldPath == "metadata.namespace":
		return ns
	case from.FieldRef != nil && from.FieldRef.FieldPath == "metadata.name":
		return pod
	case from.ResourceFieldRef != nil && strings.HasPrefix(from.ResourceFieldRef.Resource, "limits."):
		name := corev1.ResourceName(strings.TrimPrefix(from.ResourceFieldRef.Resource, "limits."))
		limit, ok := c.Resources.Limits[name]
		if !ok {
			limit = nodeAllocatable(t, name)
		}
		divisor := from.ResourceFieldRef.Divisor
		if divisor.IsZero() {
			divisor = resource.MustParse("1")
		}
		if name == corev1.ResourceCPU {
			return strconv.FormatInt(int64(math.Ceil(float64(limit.MilliValue())/float64(divisor.MilliValue()))), 10)
		}
		return strconv.FormatInt(int64(math.Ceil(float64(limit.Value())/float64(divisor.Value()))), 10)
	}
	t.Fatalf("env %s: unsupported valueFrom", e.Name)
	return ""
}

// nodeAllocatable returns the allocatable amount of resource of the
// cluster's (first) Node, where the pod would run.
func nodeAllocatable(t *testing.T, name corev1.ResourceName) resource.Quantity {
	t.Helper()
	var nodes corev1.NodeList
	if err := k8s.List(ctx, &nodes); err != nil || len(nodes.Items) == 0 {
		t.Fatalf("list nodes: %v (%d)", err, len(nodes.Items))
	}
	q, ok := nodes.Items[0].Status.Allocatable[name]
	if !ok {
		t.Fatalf("node %s has no allocatable %s", nodes.Items[0].Name, name)
	}
	return q
}

// probeURL returns the URL the kubelet would GET for probe pr of
// container c, on this host.
func probeURL(t *testing.T, c corev1.Container, pr *corev1.Probe) string {
	t.Helper()
	if pr == nil || pr.HTTPGet == nil {
		t.Fatalf("container %s: want an httpGet probe, got %+v", c.Name, pr)
	}
	port := pr.HTTPGet.Port.IntValue()
	if pr.HTTPGet.Port.Type == intstr.String {
		port = 0
		for _, p := range c.Ports {
			if p.Name == pr.HTTPGet.Port.StrVal {
				port = int(p.ContainerPort)
			}
		}
		if port == 0 {
			t.Fatalf("container %s: no port named %s", c.Name, pr.HTTPGet.Port.StrVal)
		}
	}
	return fmt.Sprintf("http://%s%s", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), pr.HTTPGet.Path)
}

// waitProbes waits until each of urls passes as a kubelet probe passes
// (a status from 200 to 399), for at most the probes' budget, and fails
// the test if p exits first.
func waitProbes(t *testing.T, p *proc, urls ...string) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for _, url := range urls {
		for {
			code, _, err := httpGet(url)
			if err == nil && code >= 200 && code < 400 {
				break
			}
			select {
			case <-p.Done():
				t.Fatalf("watcher exited (%v) before %s passed:\n%s", p.State(), url, p.Logs)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("probe %s not passed after %s (last: %d, %v)", url, wait, code, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// httpGet GETs url as a kubelet probe does (a timeout, no keep-alive).
func httpGet(url string) (int, []byte, error) {
	c := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// waitPortFree waits until nothing listens on addr (the process of the
// previous sub-test has gone).
func waitPortFree(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		l, err := net.Listen("tcp", addr)
		if err == nil {
			l.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still taken after %s: %v", addr, wait, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// counterValue scrapes url (a /metrics) and returns the value of the
// counter name with exactly the labels given, and whether it is there.
func counterValue(t *testing.T, url, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	code, body, err := httpGet(url)
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, code, err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	f, ok := families[name]
	if !ok {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		if sameLabels(m.GetLabel(), labels) {
			return m.GetCounter().GetValue(), true
		}
	}
	return 0, false
}

func sameLabels(pairs []*dto.LabelPair, want map[string]string) bool {
	if len(pairs) != len(want) {
		return false
	}
	for _, p := range pairs {
		if v, ok := want[p.GetName()]; !ok || v != p.GetValue() {
			return false
		}
	}
	return true
}
