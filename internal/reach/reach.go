// Package reach is the operator's rule for which of a deployment's own
// Temporal code a tenant's tools may call: the task queues their activity
// and workflow tools are scheduled on, the activity and workflow types
// they name, and the Nexus endpoints of their operations. It is the
// egress rule's counterpart for code reached through Temporal rather than
// over the network, and it works the same way: closed by default, opened
// by the operator in the process's environment (EnvAllow), and never
// widened by a catalog — a tenant's catalog names targets, and applying
// it is refused for any the operator did not open to that tenant.
package reach

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/words"
)

// EnvAllow opens targets to tenants, in the form of the other allow
// lists of the operator (k8sjob's AGENTFLOW_K8S_JOBS):
//
//	<tenant>=<kind>:<pattern>[+<kind>:<pattern>…],…
//
// <tenant> is a tenant id or * (every tenant), <kind> one of Kinds and
// <pattern> a name or a path.Match glob ("billing-*"). For example
// "acme=task_queue:billing-tools+activity:Refund*,*=nexus_endpoint:payments".
const EnvAllow = "AGENTFLOW_TEMPORAL_ALLOW"

// The kinds of target a tool may name.
const (
	TaskQueue     = "task_queue"
	Activity      = "activity"
	Workflow      = "workflow"
	NexusEndpoint = "nexus_endpoint"
)

// Kinds are the kinds of target, in the order the docs list them.
var Kinds = []string{TaskQueue, Activity, Workflow, NexusEndpoint}

// Target is one thing a tool names: its kind and its name.
type Target struct {
	Kind, Name string
}

// Policy is the operator's allowlist. The zero Policy (and a nil one)
// opens nothing.
type Policy struct {
	entries []entry
}

type entry struct {
	tenant, kind, pattern string
}

// Parse reads EnvAllow's value; "" is the closed policy. Every entry is
// checked: a malformed one is an error naming it, not skipped.
func Parse(s string) (*Policy, error) {
	p := &Policy{}
	for _, raw := range words.ListEntries(s) {
		tenant, targets, ok := strings.Cut(raw, "=")
		tenant = strings.TrimSpace(tenant)
		if !ok || tenant == "" || strings.TrimSpace(targets) == "" {
			return nil, fmt.Errorf("%s: %q: want <tenant>=<kind>:<pattern>[+…]", EnvAllow, raw)
		}
		if tenant != "*" && agent.ValidateID("tenant", tenant) != nil {
			return nil, fmt.Errorf("%s: %q: %q is not a tenant id or *", EnvAllow, raw, tenant)
		}
		for _, t := range strings.Split(targets, "+") {
			kind, pattern, ok := strings.Cut(strings.TrimSpace(t), ":")
			e := entry{tenant: tenant, kind: strings.TrimSpace(kind), pattern: strings.TrimSpace(pattern)}
			switch {
			case !ok || e.pattern == "":
				return nil, fmt.Errorf("%s: tenant %s: %q: want <kind>:<pattern>", EnvAllow, tenant, t)
			case !slices.Contains(Kinds, e.kind):
				return nil, fmt.Errorf("%s: tenant %s: kind %q is not one of %s", EnvAllow, tenant, e.kind, strings.Join(Kinds, ", "))
			}
			if _, err := path.Match(e.pattern, ""); err != nil {
				return nil, fmt.Errorf("%s: tenant %s: pattern %q: %w", EnvAllow, tenant, e.pattern, err)
			}
			p.entries = append(p.entries, e)
		}
	}
	return p, nil
}

// Allows reports whether the operator opened target to tenant.
func (p *Policy) Allows(tenant string, t Target) bool {
	if p == nil || t.Name == "" {
		return false
	}
	for _, e := range p.entries {
		if (e.tenant == "*" || e.tenant == tenant) && e.kind == t.Kind {
			if ok, _ := path.Match(e.pattern, t.Name); ok {
				return true
			}
		}
	}
	return false
}

// Check refuses, naming field (the catalog field that names it), a target
// the operator did not open to tenant.
func (p *Policy) Check(tenant, field string, t Target) error {
	if p.Allows(tenant, t) {
		return nil
	}
	return agent.Errorf(agent.CodeInvalid,
		"%s: %s %q is not open to tenant %q: the operator opens Temporal targets with %s", field, t.Kind, t.Name, tenant, EnvAllow)
}
