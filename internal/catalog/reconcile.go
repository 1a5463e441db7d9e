package catalog

import (
	"fmt"
	"slices"

	"github.com/itchyny/gojq"

	"github.com/agentflow/agentflow/internal/agent"
)

// reconcileDoc is agent.ToolReconcile.
type reconcileDoc struct {
	Tool      text `yaml:"tool"`
	Arguments text `yaml:"arguments"`
	Found     text `yaml:"found"`
}

// readRef is a reconciled tool that reads with another tool of its
// tenant, pinned once every tool is known (pinReads).
type readRef struct {
	owner string
	tool  text
}

// reconcile checks a tool entry's reconcile against its delivery and
// sets spec.Reconcile: both jq programs must compile, and a reconciled
// entry must say how it reads.
func (l *loader) reconcile(t *tenant, d *toolDoc, spec *agent.Tool) {
	r := d.Reconcile
	switch {
	case r == nil && spec.Delivery == agent.DeliveryReconciled:
		l.addf(d.Delivery.pos, "delivery %s needs reconcile: {arguments: <jq over {args, key}: the read's arguments>, found: <jq over {args, key, answer}: true when the write took effect>}",
			agent.DeliveryReconciled)
		return
	case r == nil:
		return
	case spec.Delivery != agent.DeliveryReconciled:
		l.addf(d.Name.pos, "reconcile is read only with delivery: %s", agent.DeliveryReconciled)
		return
	}
	ok := l.required(r.Arguments, compileJQ(r.Arguments.s))
	ok = l.required(r.Found, compileJQ(r.Found.s)) && ok
	if r.Tool.bad || !ok {
		return
	}
	if agent.ScheduledKind(spec.Kind) && (r.Tool.s == "" || r.Tool.s == spec.Name) {
		// The turn schedules its calls: the runtime has no read of its own
		// to make with it.
		l.addf(d.Name.pos, "a tool of kind %s reads with another tool: set reconcile.tool to a read the runtime runs (an HTTP or MCP tool)", spec.Kind)
		return
	}
	spec.Reconcile = &agent.ToolReconcile{Tool: r.Tool.s, Arguments: r.Arguments.s, Found: r.Found.s}
	if r.Tool.s != "" && r.Tool.s != spec.Name {
		t.reads = append(t.reads, readRef{owner: spec.Name, tool: r.Tool})
	}
}

// compileJQ says what is wrong with a jq program, nil when it compiles.
func compileJQ(q string) error {
	parsed, err := gojq.Parse(q)
	if err != nil {
		return fmt.Errorf("not a jq program: %v", err)
	}
	if _, err := gojq.Compile(parsed); err != nil {
		return fmt.Errorf("not a jq program: %v", err)
	}
	return nil
}

// pinReads pins each reconciled tool that reads with another tool to that
// tool's definition, as a tool guard's is: a tool of the tenant, granted
// to the agents or not, whose definition is known when the catalog is
// applied (not one an MCP server's entry stands for).
func (l *loader) pinReads(t *tenant) {
	for _, r := range t.reads {
		if !l.lookUp(t, "tool", t.toolAt, r.tool) {
			continue
		}
		read := t.tools[slices.IndexFunc(t.tools, func(s agent.Tool) bool { return s.Name == r.tool.s })]
		if agent.ScheduledKind(read.Kind) {
			l.addf(r.tool.pos, "tool %q is of kind %s, whose calls the turn schedules: a read must be a tool the runtime runs (an HTTP or MCP tool)", read.Name, read.Kind)
			continue
		}
		if k, ok := l.kinds.Kind(read.Kind); ok && k.Resolve != nil {
			l.addf(r.tool.pos, "tool %q is of kind %s, whose tools are known only once it is resolved: read with the entry itself (leave tool out) or with a tool of another kind",
				read.Name, read.Kind)
			continue
		}
		if read.Delivery == agent.DeliveryReconciled {
			l.addf(r.tool.pos, "tool %q is reconciled itself: a read must be a plain read", read.Name)
			continue
		}
		owner := &t.tools[slices.IndexFunc(t.tools, func(s agent.Tool) bool { return s.Name == r.owner })]
		read.FromToolkit, read.Reconcile = "", nil
		owner.Reconcile.Spec = &read
	}
}
