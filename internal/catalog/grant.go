package catalog

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
)

// toolkits resolves each toolkit's tools by name.
func (l *loader) toolkits(t *tenant) map[string][]agent.Tool {
	kits := map[string][]agent.Tool{}
	for _, k := range t.toolkits {
		var specs []agent.Tool
		for _, ref := range k.Tools {
			if l.lookUp(t, "tool", t.toolAt, ref) {
				spec := t.tools[slices.IndexFunc(t.tools, func(s agent.Tool) bool { return s.Name == ref.s })]
				spec.FromToolkit = k.Name.s
				specs = append(specs, spec)
			}
		}
		kits[k.Name.s] = specs
	}
	return kits
}

// grant resolves the tools and toolkits an agent lists into full specs.
// A tool listed by name and granted by a toolkit too is listed once, by
// name; two toolkits granting one tool give it once, from the first.
func (l *loader) grant(t *tenant, def agentDef, kits map[string][]agent.Tool) agent.Agent {
	a := def.agent
	a.Composites = def.composites
	have := map[string]bool{}
	for _, ref := range def.refs {
		if _, ok := t.toolAt[ref.s]; ok {
			i := slices.IndexFunc(t.tools, func(s agent.Tool) bool { return s.Name == ref.s })
			a.Tools = append(a.Tools, t.tools[i])
			have[ref.s] = true
		}
	}
	for _, ref := range def.refs {
		if _, ok := t.toolAt[ref.s]; ok {
			continue
		}
		if _, ok := t.toolkitAt[ref.s]; !ok {
			l.lookUp(t, "tool or toolkit", mergePos(t.toolAt, t.toolkitAt), ref)
			continue
		}
		for _, spec := range kits[ref.s] {
			if !have[spec.Name] {
				a.Tools = append(a.Tools, spec)
				have[spec.Name] = true
			}
		}
	}
	if n := len(a.Tools); n > MaxAgentTools && len(def.refs) <= MaxAgentTools {
		l.addf(def.refs[len(def.refs)-1].pos, "agent %q is granted %d tools; the limit is %d", a.ID, n, MaxAgentTools)
	}
	l.guardTools(t, def, a)
	l.checkCodeMode(def, &a)
	return a
}

// guardTools pins each tool guard of an agent to its tool's full spec, as
// the agent's own tools are: a tool of the tenant, granted to the agent
// or not, that can be a guard's (checkGuardTool). A tool an entry of a
// kind with a Resolve step stands for (an MCP server's tool e_t of entry
// e) is known only when the entry is resolved: Resolve pins it then.
func (l *loader) guardTools(t *tenant, def agentDef, a agent.Agent) {
	for i, link := range a.Guardrails {
		g := link.Tool
		if g == nil {
			continue
		}
		at := def.guardrails.at(fmt.Sprintf("/%d/tool/name", i))
		if _, ok := t.toolAt[g.Name]; ok {
			spec := t.tools[slices.IndexFunc(t.tools, func(s agent.Tool) bool { return s.Name == g.Name })]
			if k, ok := l.kinds.Kind(spec.Kind); ok && k.Resolve != nil {
				continue // what the entry stands for is known once it is resolved
			}
			if err := checkGuardTool(*g, spec); err != nil {
				l.addf(at, "%s", err)
				continue
			}
			g.Spec = &spec
			continue
		}
		if l.resolvedLater(t, g.Name) {
			continue
		}
		msg := notDefined(t, "tool", t.toolAt, g.Name)
		if entries := l.resolvedEntries(t); len(entries) > 0 {
			msg += fmt.Sprintf(" (a tool entry %s stands for, once resolved, is named %s_<its tool>)", entries[0], entries[0])
		}
		l.addf(at, "%s", msg)
	}
}

// resolvedEntries are the tenant's entries of kinds with a Resolve step.
func (l *loader) resolvedEntries(t *tenant) []string {
	var out []string
	for _, spec := range t.tools {
		if k, ok := l.kinds.Kind(spec.Kind); ok && k.Resolve != nil {
			out = append(out, spec.Name)
		}
	}
	return out
}

// resolvedLater reports whether name may be a tool that an entry of the
// tenant stands for once resolved: an entry of a kind with a Resolve step
// whose name, and an underscore, begin it (mcpToolName).
func (l *loader) resolvedLater(t *tenant, name string) bool {
	return slices.ContainsFunc(l.resolvedEntries(t), func(entry string) bool { return strings.HasPrefix(name, entry+"_") })
}

func mergePos(a, b map[string]pos) map[string]pos {
	out := maps.Clone(a)
	maps.Copy(out, b)
	return out
}
