// Package controlplane tests internal/cluster, the local control plane of
// the demo, the end-to-end tests and the benchmark, by starting it: etcd,
// kube-apiserver, the controller manager, the scheduler and kwok Nodes,
// their restart and stop, and the Process that runs each of them. It has no
// code of its own.
package controlplane
