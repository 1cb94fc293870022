package migrate

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/watcher-dev/watcher/deploy/reloader"
	"github.com/watcher-dev/watcher/internal/options"
)

// Install says where watcher is to be installed.
type Install struct {
	// Release and Namespace are the helm release and its namespace.
	Release, Namespace string
	// Chart is the path or reference of watcher's chart.
	Chart string
	// Image is watcher's image, for the image swap.
	Image string
	// RBAC is the folder of the manifests of the rights watcher needs in
	// Reloader's Deployment (deploy/reloader: rbac.yaml, or
	// rbac-namespaced.yaml for Reloader's single-namespace mode, and
	// admissionpolicy.yaml), written for namespace "reloader" and
	// ServiceAccount "reloader-reloader".
	RBAC string
	// Manifest, when set, returns that manifest for Reloader's namespace
	// and ServiceAccount (package cli gives deploy/reloader's RBAC); the
	// plan then holds it, and the commands print it (Command, -o rbac)
	// instead of editing the file.
	Manifest func(namespace, serviceAccount string, singleNamespace bool) string
	// Command is how the user ran this command ("watcher migrate").
	Command string
}

// Input is what Calculate plans from.
type Input struct {
	Reloader Reloader
	// Options are watcher's settings as it reads Reloader's arguments and
	// environment (Reloader.Options).
	Options *options.Options
	// Workloads are the cluster's workloads (Census); Unread says why
	// there are none, when they could not be listed.
	Workloads []Workload
	Unread    string
	// Neighbours are the ServiceAccounts and ConfigMaps of Reloader's
	// namespace; nil: not read (no warning on the image swap).
	Neighbours *Neighbours
	Install    Install
}

// Plan is what to apply, and what changes.
type Plan struct {
	Reloader Reloader `json:"reloader"`
	// Helm installs watcher beside Reloader, first with restart.dryRun
	// (the cut-over), then for real once Reloader is scaled to 0.
	Helm Helm `json:"helm"`
	// ImageSwap replaces Reloader's image in its own Deployment instead.
	ImageSwap ImageSwap `json:"imageSwap"`
	// Notes are watcher's remarks on Reloader's settings (Options.Notes).
	Notes []string `json:"notes"`
	// Differences are what changes a restart on this cluster, or is done
	// differently.
	Differences []Difference `json:"differences"`
	// Counts sum up the workloads; nil when they could not be listed
	// (Unread says why).
	Counts *Counts `json:"counts,omitempty"`
	Unread string  `json:"unread,omitempty"`
	// Workloads are those that opt in, restart under either install or
	// carry Reloader's marks (for -o json; the text counts them).
	Workloads []Workload `json:"workloads,omitempty"`
}

// Helm is the helm path: watcher's chart with Reloader's arguments.
type Helm struct {
	// ExtraArgs are Reloader's arguments as they are (a webhook URL shown as
	// Hidden): watcher reads them with Reloader's meaning.
	ExtraArgs []string `json:"extraArgs"`
	Values    []Value  `json:"values"`
	// Install is the command of the cut-over (restart.dryRun true, beside
	// Reloader); Compare checks it; Scale stops Reloader; Upgrade makes
	// watcher restart for real.
	Install string `json:"install"`
	Compare string `json:"compare"`
	Scale   string `json:"scale"`
	Upgrade string `json:"upgrade,omitempty"`
}

// ImageSwap is the other path: Reloader's Deployment runs watcher's image,
// with its arguments, environment and probes unchanged.
type ImageSwap struct {
	RBAC string `json:"rbac"`
	// Manifest is that RBAC, when Install.Manifest gives it.
	Manifest string   `json:"manifest,omitempty"`
	Commands []string `json:"commands"`
	// Warning, one line per element, says that Reloader's namespace is
	// shared with others (or could not be read), where the image swap
	// grants watcher's rights on its own state.
	Warning []string `json:"warning,omitempty"`
}

// Counts sum up the workloads of the cluster.
type Counts struct {
	Workloads int `json:"workloads"`
	// OptIn opt in by Reloader's annotations; WithReloaderArgs and
	// WithOwnValues restart under each install (see Workload).
	OptIn            int `json:"optIn"`
	WithReloaderArgs int `json:"withReloaderArgs"`
	WithOwnValues    int `json:"withOwnValues"`
	// ByKind counts WithReloaderArgs per kind.
	ByKind map[string]int `json:"byKind"`
}

// Calculate plans the switch of in.Reloader to watcher.
func Calculate(in Input) Plan {
	r, o := in.Reloader, in.Options
	p := Plan{Reloader: r, Notes: nonNil(o.Notes), Unread: in.Unread, Differences: []Difference{}}
	p.Helm = helm(in)
	p.ImageSwap = imageSwap(in)
	if in.Unread == "" {
		p.Counts = count(in.Workloads)
	}
	for _, w := range in.Workloads {
		if w.OptsIn || w.WithReloaderArgs || w.WithOwnValues || len(w.Marks) > 0 {
			p.Workloads = append(p.Workloads, w)
		}
	}
	for _, d := range differences {
		p.Differences = append(p.Differences, d(in)...)
	}
	return p
}

func helm(in Input) Helm {
	r, o, inst := in.Reloader, in.Options, in.Install
	h := Helm{ExtraArgs: nonNil(ShownArgs(r.Args)), Values: Values(r, o)}
	if h.Values == nil {
		h.Values = []Value{}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "helm install %s %s -n %s --create-namespace", inst.Release, inst.Chart, inst.Namespace)
	if len(r.Args) > 0 {
		fmt.Fprintf(&b, " \\\n  --set-json %s", quote("extraArgs="+jsonText(h.ExtraArgs)))
	}
	for _, v := range h.Values {
		fmt.Fprintf(&b, " \\\n  --set-json %s", quote(v.Path+"="+v.JSON))
	}
	if !o.DryRun {
		b.WriteString(" \\\n  --set restart.dryRun=true")
		h.Upgrade = fmt.Sprintf("helm upgrade %s %s -n %s --reuse-values --set restart.dryRun=false", inst.Release, inst.Chart, inst.Namespace)
	}
	h.Install = b.String()
	ns := ""
	if len(o.Namespaces) == 1 {
		ns = " -n " + o.Namespaces[0]
	}
	cmd := inst.Command
	if cmd == "" {
		cmd = "watcher migrate"
	}
	h.Compare = cmd + " --compare" + ns + " --since 1h"
	h.Scale = fmt.Sprintf("kubectl -n %s scale deployment/%s --replicas=0", r.Namespace, r.Name)
	return h
}

func imageSwap(in Input) ImageSwap {
	r, inst := in.Reloader, in.Install
	// Reloader's chart sets KUBERNETES_NAMESPACE with watchGlobally: false,
	// and then grants a Role in its own namespace only.
	_, single := r.Env["KUBERNETES_NAMESPACE"]
	files := reloader.Files(single)
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = inst.RBAC + "/" + f
	}
	s := ImageSwap{RBAC: fmt.Sprintf("the rights watcher needs beyond Reloader's chart (its Lease, hash key Secret and settings ConfigMap in %s, watching the workloads), and the admission policy that narrows them to watcher's own objects: %s with namespace %s and ServiceAccount %s",
		r.Namespace, strings.Join(paths, " and "), r.Namespace, r.ServiceAccount),
		Warning: sharedWarning(r, in.Neighbours)}
	apply := fmt.Sprintf("sed %s %s | kubectl apply -f -", reloader.Sed(r.Namespace, r.ServiceAccount), strings.Join(paths, " "))
	if inst.Manifest != nil {
		s.Manifest = inst.Manifest(r.Namespace, r.ServiceAccount, single)
		apply = fmt.Sprintf("%s -n %s --deployment %s -o rbac | kubectl apply -f -", inst.Command, r.Namespace, r.Name)
	}
	s.Commands = []string{apply, fmt.Sprintf("kubectl -n %s set image deployment/%s %s=%s", r.Namespace, r.Name, r.Container, inst.Image)}
	return s
}

func count(ws []Workload) *Counts {
	c := &Counts{Workloads: len(ws), ByKind: map[string]int{}}
	for _, w := range ws {
		if w.OptsIn {
			c.OptIn++
		}
		if w.WithReloaderArgs {
			c.WithReloaderArgs++
			c.ByKind[w.Kind]++
		}
		if w.WithOwnValues {
			c.WithOwnValues++
		}
	}
	return c
}

// quote quotes s for a POSIX shell.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// jsonText is v as JSON, with no HTML escapes (it is for a shell).
func jsonText(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // plain data
	return strings.TrimSpace(b.String())
}
