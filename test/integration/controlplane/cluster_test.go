package controlplane

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/watcher-dev/watcher/internal/cluster"
)

const (
	testNamespace = "cluster-test"
	rolloutWait   = 30 * time.Second
)

// TestCluster starts the whole control plane once and checks, in order,
// that workloads roll out on the kwok Nodes, that RBAC and the kubeconfig
// work, that RestartAPIServer brings the API back and that Stop leaves no
// process behind.
func TestCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := logr.NewContext(t.Context(), testr.New(t))
	began := time.Now()
	c, err := cluster.Start(ctx, cluster.Options{Nodes: 2, Users: []cluster.User{{Name: "alice", Groups: []string{"dev"}}}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = c.Stop() })
	t.Logf("cluster started in %s", time.Since(began).Round(time.Millisecond))

	client := kubernetes.NewForConfigOrDie(c.RESTConfig())
	_, err = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: testNamespace},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	t.Run("Deployment rolls out and its Pods run", func(t *testing.T) {
		g := NewWithT(t)
		_, err := client.AppsV1().Deployments(testNamespace).Create(ctx, newDeployment("web", 2), metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(deploymentRolledOut(t, client, "web", 2)).WithTimeout(rolloutWait).Should(Succeed())
		pods, err := client.CoreV1().Pods(testNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pods.Items).To(HaveLen(2))
		for _, pod := range pods.Items {
			g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning), pod.Name)
			g.Expect(podReady(&pod)).To(BeTrue(), pod.Name)
			g.Expect(pod.Spec.NodeName).To(HavePrefix("kwok-node-"), pod.Name)
		}
	})

	t.Run("changed pod template rolls out a new ReplicaSet", func(t *testing.T) {
		g := NewWithT(t)
		patch := []byte(`{"spec":{"template":{"metadata":{"annotations":{"restarted":"1"}}}}}`)
		_, err := client.AppsV1().Deployments(testNamespace).Patch(ctx, "web", types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(deploymentRolledOut(t, client, "web", 2)).WithTimeout(rolloutWait).Should(Succeed())
		g.Eventually(func(g Gomega) {
			sets, err := client.AppsV1().ReplicaSets(testNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(sets.Items).To(HaveLen(2))
			for _, rs := range sets.Items {
				want := int32(0)
				if rs.Spec.Template.Annotations["restarted"] == "1" {
					want = 2
				}
				g.Expect(rs.Status.ReadyReplicas).To(Equal(want), rs.Name)
			}
		}).WithTimeout(rolloutWait).Should(Succeed())
	})

	t.Run("DaemonSet and StatefulSet become ready", func(t *testing.T) {
		g := NewWithT(t)
		_, err := client.AppsV1().DaemonSets(testNamespace).Create(ctx, newDaemonSet("agent"), metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		_, err = client.AppsV1().StatefulSets(testNamespace).Create(ctx, newStatefulSet("db", 2), metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(func(g Gomega) {
			ds, err := client.AppsV1().DaemonSets(testNamespace).Get(ctx, "agent", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ds.Status.DesiredNumberScheduled).To(Equal(int32(2)))
			g.Expect(ds.Status.NumberReady).To(Equal(int32(2)))
			g.Expect(ds.Status.UpdatedNumberScheduled).To(Equal(int32(2)))
		}).WithTimeout(rolloutWait).Should(Succeed())
		g.Eventually(func(g Gomega) {
			sts, err := client.AppsV1().StatefulSets(testNamespace).Get(ctx, "db", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(sts.Status.ReadyReplicas).To(Equal(int32(2)))
			g.Expect(sts.Status.CurrentRevision).To(Equal(sts.Status.UpdateRevision))
		}).WithTimeout(rolloutWait).Should(Succeed())
	})

	t.Run("kubeconfig files authenticate admin and users", func(t *testing.T) {
		g := NewWithT(t)
		admin, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
		g.Expect(err).NotTo(HaveOccurred())
		nodes, err := kubernetes.NewForConfigOrDie(admin).CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(nodes.Items).To(HaveLen(2))

		path, err := c.UserKubeconfig("alice")
		g.Expect(err).NotTo(HaveOccurred())
		alice, err := clientcmd.BuildConfigFromFlags("", path)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = kubernetes.NewForConfigOrDie(alice).CoreV1().Pods(testNamespace).List(ctx, metav1.ListOptions{})
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want forbidden, got %v", err)
		g.Expect(err).To(MatchError(ContainSubstring(`User "alice"`)))

		_, err = c.UserRESTConfig("mallory")
		g.Expect(err).To(HaveOccurred())
	})

	t.Run("API answers after RestartAPIServer", func(t *testing.T) {
		g := NewWithT(t)
		before := c.PIDs()["kube-apiserver"]
		g.Expect(c.RestartAPIServer(ctx)).To(Succeed())
		g.Expect(c.PIDs()["kube-apiserver"]).NotTo(Equal(before))
		g.Expect(processGone(before)).To(BeTrue())
		_, err := client.AppsV1().Deployments(testNamespace).Get(ctx, "web", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
	})

	t.Run("Stop leaves no process and no files", func(t *testing.T) {
		g := NewWithT(t)
		pids := c.PIDs()
		g.Expect(pids).To(HaveKey("kwok"))
		g.Expect(c.Stop()).To(Succeed())
		for name, pid := range pids {
			g.Expect(processGone(pid)).To(BeTrue(), "%s (pid %d) still runs", name, pid)
		}
		g.Expect(filepath.Dir(c.LogDir)).NotTo(BeADirectory(), "the cluster's folder")
		g.Expect(c.Stop()).To(Succeed(), "second Stop")
		g.Expect(c.RestartAPIServer(ctx)).NotTo(Succeed(), "restart after Stop")
	})
}

// TestAPIServerOnly checks the fast mode for integration tests: only etcd
// and kube-apiserver run, and the API works. It also checks the audit log:
// it holds the requests of a user in system:masters, not the admin's.
func TestAPIServerOnly(t *testing.T) {
	g := NewWithT(t)
	ctx := logr.NewContext(t.Context(), testr.New(t))
	began := time.Now()
	c, err := cluster.Start(ctx, cluster.Options{APIServerOnly: true, AuditLog: true,
		Users: []cluster.User{{Name: "bob", Groups: []string{"system:masters"}}}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = c.Stop() })
	t.Logf("etcd and kube-apiserver started in %s", time.Since(began).Round(time.Millisecond))

	g.Expect(c.PIDs()).To(HaveLen(2))
	g.Expect(c.PIDs()).To(HaveKey("kube-apiserver"))
	client := kubernetes.NewForConfigOrDie(c.RESTConfig())
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nodes.Items).To(BeEmpty())

	bobConfig, err := c.UserRESTConfig("bob")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = kubernetes.NewForConfigOrDie(bobConfig).CoreV1().Secrets("default").List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred(), "system:masters may list Secrets")
	g.Eventually(func() []string { return auditedRequests(t, c.AuditLogPath) }).
		Should(ContainElement("bob list secrets"))
	g.Expect(auditedRequests(t, c.AuditLogPath)).NotTo(ContainElement(HavePrefix("admin ")))
	g.Expect(c.Stop()).To(Succeed())
	for name, pid := range c.PIDs() {
		g.Expect(processGone(pid)).To(BeTrue(), "%s (pid %d) still runs", name, pid)
	}
}

// TestStartFailureShowsLog checks that a component that fails to start
// makes Start fail with the end of its log and leaves nothing running.
func TestStartFailureShowsLog(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	for _, name := range []string{"etcd", "kube-apiserver"} {
		script := "#!/bin/sh\necho \"" + name + ": bad flag --nonsense\" >&2\nexit 3\n"
		g.Expect(os.WriteFile(dir+"/"+name, []byte(script), 0o755)).To(Succeed())
	}
	_, err := cluster.Start(t.Context(), cluster.Options{BinDir: dir, APIServerOnly: true})
	g.Expect(err).To(MatchError(ContainSubstring("start etcd")))
	g.Expect(err).To(MatchError(ContainSubstring("etcd: bad flag --nonsense")))
}

// TestChildrenDieWithParent checks that when the process that started a
// cluster is killed outright, without a chance to call Stop, the components
// die with it. The test binary runs itself as that process.
func TestChildrenDieWithParent(t *testing.T) {
	if os.Getenv(helperEnv) != "" {
		runHelper()
		return
	}
	g := NewWithT(t)
	helper := exec.Command(os.Args[0], "-test.run=^TestChildrenDieWithParent$")
	helper.Env = append(os.Environ(), helperEnv+"=1")
	helper.Stderr = os.Stderr
	stdout, err := helper.StdoutPipe()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(helper.Start()).To(Succeed())
	t.Cleanup(func() { _ = helper.Process.Kill(); _ = helper.Wait() })

	var started helperReport
	line, err := bufio.NewReader(stdout).ReadString('\n')
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(json.Unmarshal([]byte(line), &started)).To(Succeed(), line)
	t.Cleanup(func() { _ = os.RemoveAll(started.Dir) }) // only Stop removes it
	g.Expect(started.PIDs).To(HaveLen(2))
	for _, pid := range started.PIDs {
		g.Expect(processGone(pid)).To(BeFalse())
	}

	g.Expect(helper.Process.Kill()).To(Succeed())
	_ = helper.Wait()
	for name, pid := range started.PIDs {
		g.Eventually(func() bool { return processGone(pid) }).WithTimeout(5*time.Second).
			Should(BeTrue(), "%s (pid %d) outlived its parent", name, pid)
	}
}

// helperEnv makes the test binary run as TestChildrenDieWithParent's helper.
const helperEnv = "WATCHER_CLUSTER_TEST_HELPER"

// helperReport is what the helper prints once its cluster runs.
type helperReport struct {
	PIDs map[string]int
	Dir  string
}

// runHelper starts a cluster, reports it on stdout and waits to be killed.
func runHelper() {
	c, err := cluster.Start(context.Background(), cluster.Options{APIServerOnly: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	report, _ := json.Marshal(helperReport{PIDs: c.PIDs(), Dir: filepath.Dir(c.LogDir)})
	fmt.Println(string(report))
	select {}
}

// auditedRequests returns "user verb resource" for each complete line of an
// audit log.
func auditedRequests(t *testing.T, path string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read audit log: %v", err)
	}
	lines := strings.Split(string(data), "\n")
	var requests []string
	for _, line := range lines[:len(lines)-1] { // the last one is empty or still being written
		var ev struct {
			User      struct{ Username string }
			Verb      string
			ObjectRef struct{ Resource string }
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("audit log line %q: %v", line, err)
		}
		requests = append(requests, ev.User.Username+" "+ev.Verb+" "+ev.ObjectRef.Resource)
	}
	return requests
}

func deploymentRolledOut(t *testing.T, client kubernetes.Interface, name string, replicas int32) func(Gomega) {
	return func(g Gomega) {
		d, err := client.AppsV1().Deployments(testNamespace).Get(t.Context(), name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
		g.Expect(d.Status.Replicas).To(Equal(replicas), "no old Pods left")
		g.Expect(d.Status.UpdatedReplicas).To(Equal(replicas))
		g.Expect(d.Status.ReadyReplicas).To(Equal(replicas))
		g.Expect(d.Status.AvailableReplicas).To(Equal(replicas))
	}
}

func podReady(pod *corev1.Pod) bool {
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// processGone reports whether pid no longer runs: it does not exist, or it
// is a zombie that nobody has reaped yet (an orphan in a container whose
// init does not reap).
func processGone(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	// The state follows the command name, which is in parentheses.
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] == "Z"
}

func podTemplate(app string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name:  app,
			Image: "registry.invalid/" + app + ":1", // kwok never pulls it
		}}},
	}
}

func selector(app string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
}

func newDeployment(name string, replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: selector(name),
			Template: podTemplate(name),
		},
	}
}

func newDaemonSet(name string) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       appsv1.DaemonSetSpec{Selector: selector(name), Template: podTemplate(name)},
	}
}

func newStatefulSet(name string, replicas int32) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(replicas),
			ServiceName: name,
			Selector:    selector(name),
			Template:    podTemplate(name),
		},
	}
}
