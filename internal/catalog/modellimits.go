package catalog

import (
	"gopkg.in/yaml.v3"

	"github.com/agentflow/agentflow/internal/agent"
)

// modelLimitsDoc is a tenant's own limits on its model calls, by governed
// key (a provider, or provider:model), each written as the operator's
// AGENTFLOW_MODEL_LIMITS writes a key's limits:
//
//	model_limits:
//	  openai: requests:100/1m,concurrent:4
//
// The operator's limits bound them: a wider one is refused when the
// catalog is applied (store.ApplyCatalog), where the operator's are known.
// An empty mapping ({}) removes the tenant's own.
type modelLimitsDoc struct {
	pos
	limits map[string]agent.ModelLimits
}

func (d *modelLimitsDoc) decode(l *loader, n *yaml.Node) {
	d.limits = map[string]agent.ModelLimits{}
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		l.wrong(d.pos, n, "a mapping of <provider>[:<model>] to its limits, such as openai: requests:100/1m,concurrent:4")
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], resolve(n.Content[i+1])
		at := pos{file: d.file, line: k.Line, field: join(d.field, k.Value)}
		if err := agent.CheckModelKey(k.Value); err != nil {
			l.addf(at, "%s", err.Error())
			continue
		}
		if _, dup := d.limits[k.Value]; dup {
			l.addf(at, "is repeated")
			continue
		}
		if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" {
			l.wrong(at, v, "limits such as requests:100/1m,concurrent:4")
			continue
		}
		lim, err := agent.ParseModelLimits(v.Value)
		if err != nil {
			l.addf(at.on(v), "%s", err.Error())
			continue
		}
		d.limits[k.Value] = lim
	}
}

// modelLimits sets the tenant's own model limits.
func (l *loader) modelLimits(t *tenant, d *modelLimitsDoc, at pos) {
	if t.modelLimitsSet {
		l.addf(at, "model_limits are already set for tenant %q: give them in one document", t.id)
		return
	}
	t.modelLimits, t.modelLimitsSet = d.limits, true
}
