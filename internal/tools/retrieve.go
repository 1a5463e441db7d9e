package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
)

// maxRetrieveQuery bounds a retrieve call's query.
const maxRetrieveQuery = 2000

// Retrieve returns the retrieve kind: the model searches the tenant's
// collections that the config names (agent.RetrieveConfig: collections,
// top_k, budget, mode, filter, model_filters) and gets the chunks
// found as passages under markers [n] (agent.Passages), with their
// citations (Output.Citations) for the turn's result. The collections
// must be the tenant's when the catalog is applied (Resolve) and when a
// call is made: another tenant's is NotFound, as a missing one is. The
// passages are data: the agent's injection guard screens them as it
// screens every tool's output.
//
// Searching changes nothing, so the kind asks for no approval.
func Retrieve() Kind {
	return Kind{
		Name:        agent.KindRetrieve,
		Description: "Search the knowledge base for passages that answer a question. Cite the passages you use by their markers, such as [1].",
		Parameters:  json.RawMessage(agent.RetrieveParameters),
		Config:      json.RawMessage(agent.RetrieveConfigSchema),
		Build: func(spec agent.Tool, deps Deps) (Tool, error) {
			cfg, err := agent.ParseRetrieveConfig(spec.Config)
			if err != nil {
				return nil, err
			}
			return retrieveTool{cfg: cfg, deps: deps}, nil
		},
		Resolve: resolveRetrieve,
	}
}

// resolveRetrieve checks, when the catalog is applied, that every
// collection the config names is the tenant's.
func resolveRetrieve(ctx context.Context, spec agent.Tool, env ResolveEnv) ([]agent.Tool, error) {
	cfg, err := agent.ParseRetrieveConfig(spec.Config)
	if err != nil {
		return nil, err
	}
	if err := CheckCollections(ctx, env.Deps.Knowledge, env.TenantID, cfg.Collections); err != nil {
		return nil, err
	}
	return []agent.Tool{spec}, nil
}

// CheckCollections says whether the tenant has each collection: the check
// of a catalog that names them (the retrieve kind, an agent's prepare
// phase). Without a knowledge store (a process that only applies
// catalogs) nothing is checked here; calls check again.
func CheckCollections(ctx context.Context, k Knowledge, tenant string, names []string) error {
	if k == nil {
		return nil
	}
	for _, name := range names {
		if _, err := k.Collection(ctx, tenant, name); err != nil {
			if agent.IsCode(err, agent.CodeNotFound) {
				return agent.Errorf(agent.CodeNotFound, "collection %q: the tenant has no collection of that name", name)
			}
			return fmt.Errorf("collection %q: %w", name, err)
		}
	}
	return nil
}

type retrieveTool struct {
	cfg  agent.RetrieveConfig
	deps Deps
}

func (t retrieveTool) Run(ctx context.Context, call Call) (Output, error) {
	var args struct {
		Query  string            `json:"query"`
		Filter map[string]string `json:"filter"`
	}
	if err := decodeArgs(call.Args, &args, `{"query": "..."}`); err != nil {
		return Output{}, err
	}
	q, err := queryArg(args.Query, maxRetrieveQuery, "a question or keywords")
	if err != nil {
		return Output{}, err
	}
	r := t.cfg.Retrieval
	r.Filter = maps.Clone(r.Filter)
	for _, k := range slices.Sorted(maps.Keys(args.Filter)) {
		if !slices.Contains(t.cfg.ModelFilters, k) {
			allowed := "none"
			if len(t.cfg.ModelFilters) > 0 {
				allowed = strings.Join(t.cfg.ModelFilters, ", ")
			}
			return Output{}, agent.Errorf(agent.CodeInvalid, "filter %q is not allowed; the keys you may filter by: %s", k, allowed)
		}
		if _, fixed := r.Filter[k]; fixed {
			continue // the config's value stands
		}
		if r.Filter == nil {
			r.Filter = map[string]string{}
		}
		r.Filter[k] = args.Filter[k]
	}
	if t.deps.Knowledge == nil {
		return Output{}, agent.Errorf(agent.CodeInternal, "%s has no knowledge store", agent.KindRetrieve)
	}
	hits, _, err := t.deps.Knowledge.Retrieve(ctx, call.TenantID, q, r)
	if err != nil {
		if agent.IsCode(err, agent.CodeInvalid) || agent.IsCode(err, agent.CodeNotFound) {
			return Output{}, err
		}
		return Output{}, fmt.Errorf("retrieve: %w", err)
	}
	return Output{Text: agent.Passages(q, hits), Citations: agent.Citations(hits)}, nil
}
