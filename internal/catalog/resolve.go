package catalog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/secrets"
	"github.com/agentflow/agentflow/internal/tools"
)

// Resolve runs, for every tool of cat whose kind has a Resolve step
// (tools.Kind.Resolve: an MCP server's tool list, an API's document), that
// step, and puts the tools the entry stands for in its place: in the
// tenant's tools and in the tool list of every agent granted the entry.
// It runs when a catalog is applied, after Parse; env gives the tenant's
// ResolveEnv and is called only for tenants that need it. Problems are
// returned together, as an agent.CodeInvalid error: the catalog's to fix,
// or to apply with AllowUnreachable when a far side is down.
func Resolve(ctx context.Context, kinds Kinds, cat *agent.Catalog, env func(agent.TenantCatalog) (tools.ResolveEnv, error)) error {
	var problems []error
	for i := range cat.Tenants {
		problems = append(problems, resolveTenant(ctx, kinds, &cat.Tenants[i], env)...)
		problems = append(problems, checkPrepare(ctx, kinds.Deps().Knowledge, &cat.Tenants[i])...)
	}
	if len(problems) == 0 {
		return nil
	}
	return agent.WithCode(agent.CodeInvalid, errors.Join(problems...))
}

// resolveTenant resolves one tenant's entries (Resolve) and returns its
// problems together; its tools are replaced only when every entry
// resolved without one.
func resolveTenant(ctx context.Context, kinds Kinds, tc *agent.TenantCatalog, env func(agent.TenantCatalog) (tools.ResolveEnv, error)) []error {
	// What Resolve fetches with secrets (an API's document, a stdio
	// server's listing) it fetches for this tenant, with its grants.
	ctx = secrets.WithTenant(ctx, tc.TenantID)
	var problems []error
	var e *tools.ResolveEnv
	resolved := map[string][]agent.Tool{}
	names := map[string]string{} // tool name → the entry it comes from
	for _, t := range tc.Tools {
		if k, ok := kinds.Kind(t.Kind); !ok || k.Resolve == nil {
			names[t.Name] = t.Name
		}
	}
	var out []agent.Tool
	for _, t := range tc.Tools {
		k, ok := kinds.Kind(t.Kind)
		if !ok || k.Resolve == nil {
			out = append(out, t)
			continue
		}
		if e == nil {
			got, err := env(*tc)
			if err != nil {
				return []error{fmt.Errorf("tenant %q: %w", tc.TenantID, err)}
			}
			got.Deps = kinds.Deps()
			e = &got
		}
		got, err := k.Resolve(ctx, t, *e)
		if err != nil {
			hint := ""
			if agent.IsCode(err, agent.CodeUnavailable) {
				hint = " (to apply the catalog without its tools for now, allow unreachable entries)"
			}
			problems = append(problems, fmt.Errorf("tool %q (kind %s): %w%s", t.Name, t.Kind, err, hint))
			continue
		}
		problems = append(problems, adoptResolved(t, k, got, names)...)
		resolved[t.Name] = got
		out = append(out, got...)
	}
	if len(problems) > 0 || len(resolved) == 0 {
		return problems
	}
	if len(out) > MaxTools {
		return []error{agent.Errorf(agent.CodeInvalid, "tenant %q has %d tools once its entries are resolved; the limit is %d", tc.TenantID, len(out), MaxTools)}
	}
	tc.Tools = out
	for i := range tc.Agents {
		problems = append(problems, grantResolved(&tc.Agents[i], out, resolved)...)
	}
	return problems
}

// adoptResolved makes the tools got that entry t of kind k stands for
// tools of the tenant: each with a name no other tool has (names, which
// it extends), and the kind, source, approval, delivery, execution and
// rate limit the entry gives them. It returns what is wrong with them.
func adoptResolved(t agent.Tool, k tools.Kind, got []agent.Tool, names map[string]string) []error {
	var problems []error
	for j := range got {
		g := &got[j]
		if err := checkToolName(g.Name); err != nil {
			problems = append(problems, agent.Errorf(agent.CodeInvalid, "tool %q (kind %s) offers a tool named %q: %v", t.Name, t.Kind, g.Name, err))
			continue
		}
		if from, dup := names[g.Name]; dup {
			problems = append(problems, agent.Errorf(agent.CodeInvalid, "tool %q (kind %s) offers a tool named %q, and %q is taken by %s", t.Name, t.Kind, g.Name, g.Name, describeOwner(from, g.Name)))
			continue
		}
		names[g.Name] = t.Name
		g.Kind, g.Source = t.Kind, t.Name
		g.Approval = tools.DerivedApproval(k, t.Approval, g.Approval)
		g.Delivery = tools.DerivedDelivery(t.Delivery, g.Delivery)
		g.Execution = cmp.Or(g.Execution, t.Execution)
		g.RateLimit = t.RateLimit
	}
	return problems
}

// grantResolved puts in the agent's tool list, in place of each entry
// it is granted, the tools the entry stands for (from the same toolkit),
// and pins its tool guards among the tenant's tools, out.
func grantResolved(ag *agent.Agent, out []agent.Tool, resolved map[string][]agent.Tool) []error {
	var problems []error
	var granted []agent.Tool
	for _, t := range ag.Tools {
		got, ok := resolved[t.Name]
		if !ok {
			granted = append(granted, t)
			continue
		}
		for _, g := range got {
			g.FromToolkit = t.FromToolkit
			granted = append(granted, g)
		}
	}
	if len(granted) > MaxAgentTools {
		problems = append(problems, agent.Errorf(agent.CodeInvalid, "agent %q has %d tools once its entries are resolved; the limit is %d", ag.ID, len(granted), MaxAgentTools))
	}
	ag.Tools = granted
	return append(problems, pinGuardTools(ag, out, resolved)...)
}

// pinGuardTools pins the agent's tool guards that the loader left to
// Resolve — those naming a tool an entry stands for — to the tool's spec
// among the tenant's resolved tools, checked as the loader checks the
// others (checkGuardTool). A guard whose entry resolved to nothing (a
// server that could not be reached, applied with AllowUnreachable) stays
// unpinned: it fails when asked until the catalog is applied again.
func pinGuardTools(ag *agent.Agent, tenantTools []agent.Tool, resolved map[string][]agent.Tool) []error {
	var problems []error
	for i, link := range ag.Guardrails {
		g := link.Tool
		if g == nil || g.Spec != nil {
			continue
		}
		where := fmt.Sprintf("agent %q: guardrails[%d].tool", ag.ID, i)
		if j := slices.IndexFunc(tenantTools, func(t agent.Tool) bool { return t.Name == g.Name }); j >= 0 {
			spec := tenantTools[j]
			spec.FromToolkit = ""
			if err := checkGuardTool(*g, spec); err != nil {
				problems = append(problems, agent.Errorf(agent.CodeInvalid, "%s: %v", where, err))
				continue
			}
			g.Spec = &spec
			continue
		}
		// The entry the name would be a tool of: the longest that begins it.
		entry := ""
		for e := range resolved {
			if (g.Name == e || strings.HasPrefix(g.Name, e+"_")) && len(e) > len(entry) {
				entry = e
			}
		}
		var names []string
		for _, t := range resolved[entry] {
			names = append(names, t.Name)
		}
		switch {
		case entry != "" && len(names) == 0:
			// Not reached now: the guard fails until it is.
		case g.Name == entry:
			problems = append(problems, agent.Errorf(agent.CodeInvalid, "%s: %q is the entry that stands for its tools (%s): name one of them", where, g.Name, listNames(names)))
		case entry != "":
			problems = append(problems, agent.Errorf(agent.CodeInvalid, "%s: entry %q offers no tool %q; it offers %s", where, entry, g.Name, listNames(names)))
		default:
			problems = append(problems, agent.Errorf(agent.CodeInvalid, "%s: %q is not a tool of the tenant", where, g.Name))
		}
	}
	return problems
}

// listNames lists names for a message, the first few only.
func listNames(names []string) string {
	if len(names) > 10 {
		names = append(names[:10:10], "…")
	}
	return strings.Join(names, ", ")
}

func describeOwner(entry, name string) string {
	if entry == name {
		return "a tool of its own"
	}
	return fmt.Sprintf("a tool of %q", entry)
}
