package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// auditPolicy records every request at level Metadata (user, verb, resource,
// status and timestamps; no bodies), except those of the admin user, which
// the cluster's own components and the test or benchmark driving the
// cluster use, and those kube-apiserver makes to itself. What is left is
// what the Options.Users did. RequestReceived is left out: a request is
// logged when it completes, and a long-running one (a watch) also when its
// response starts.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: None
    users: ["` + adminUser + `", "system:apiserver"]
  - level: Metadata
`

// auditLogName is the audit log's file name in LogDir.
const auditLogName = "audit.log"

// auditArgs writes the audit policy into the cluster's folder and returns
// the kube-apiserver flags that make it log to c.AuditLogPath, one JSON
// object a line, never rotated, each event written as its request reaches
// the stage (the default blocking mode, no batching delay).
func (c *Cluster) auditArgs() ([]string, error) {
	policy := filepath.Join(c.dir, "audit-policy.yaml")
	text := auditPolicy
	if c.auditAdmin {
		text = strings.Replace(text, `"`+adminUser+`", `, "", 1)
	}
	if err := os.WriteFile(policy, []byte(text), 0o600); err != nil {
		return nil, fmt.Errorf("write audit policy: %w", err)
	}
	return []string{
		"--audit-policy-file=" + policy,
		"--audit-log-path=" + c.AuditLogPath,
		"--audit-log-format=json",
		"--audit-log-maxsize=0",
	}, nil
}
