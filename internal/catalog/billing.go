package catalog

import (
	"math"

	"gopkg.in/yaml.v3"

	"github.com/agentflow/agentflow/internal/agent"
)

// priceDoc is one model's price, in USD per million tokens.
type priceDoc struct {
	Model       text  `yaml:"model"`
	Input       money `yaml:"input"`
	Output      money `yaml:"output"`
	CachedInput money `yaml:"cached_input"`
}

// budgetsDoc bounds a tenant's model calls per UTC day and month.
type budgetsDoc struct {
	Day   *budgetDoc `yaml:"day"`
	Month *budgetDoc `yaml:"month"`
}

type budgetDoc struct {
	Tokens count `yaml:"tokens"`
	Cost   money `yaml:"cost"`
}

// MaxPrices bounds a tenant's price table.
const MaxPrices = 1000

// money is a non-negative number of USD; null is the same as leaving it
// out.
type money struct {
	pos
	v       float64
	set     bool // a valid value was written
	written bool // a value other than null was written, valid or not
}

func (m *money) decode(l *loader, n *yaml.Node) {
	if isNull(n) {
		return
	}
	m.written = true
	var v float64
	switch {
	case n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!float") || n.Decode(&v) != nil:
		l.wrong(m.pos, n, "a number of USD")
	case math.IsNaN(v) || math.IsInf(v, 0):
		l.addf(m.on(n), "%s: want a finite number of USD", n.Value)
	case v < 0:
		l.addf(m.on(n), "%s is negative: want 0 or more USD", n.Value)
	default:
		m.v, m.set = v, true
	}
}

// prices sets the tenant's price table: one entry per model.
func (l *loader) prices(t *tenant, docs []priceDoc, at pos) {
	if t.pricesSet {
		l.addf(at, "prices are already set for tenant %q: give them in one document", t.id)
		return
	}
	if len(docs) > MaxPrices {
		l.addf(at, "has %d entries; the limit is %d", len(docs), MaxPrices)
		return
	}
	t.pricesSet, t.prices = true, []agent.Price{}
	seen := map[string]pos{}
	for _, d := range docs {
		if !l.required(d.Model, nil) {
			continue
		}
		if first, dup := seen[d.Model.s]; dup {
			l.addf(d.Model.pos, "model %q already has a price at %s", d.Model.s, first)
			continue
		}
		seen[d.Model.s] = d.Model.pos
		if !d.Input.written {
			l.addf(d.Input.pos, "is required: USD per million prompt tokens")
		}
		if !d.Output.written {
			l.addf(d.Output.pos, "is required: USD per million completion tokens")
		}
		p := agent.Price{Model: d.Model.s, Input: d.Input.v, Output: d.Output.v, CachedInput: d.Input.v}
		if d.CachedInput.set {
			p.CachedInput = d.CachedInput.v
		}
		t.prices = append(t.prices, p)
	}
}

// budgets sets the tenant's budgets.
func (l *loader) budgets(t *tenant, d *budgetsDoc, at pos) {
	if t.budgets != nil {
		l.addf(at, "budgets are already set for tenant %q: give them in one document", t.id)
		return
	}
	b := &agent.Budgets{}
	period := func(d *budgetDoc, name string) *agent.Budget {
		if d == nil {
			return nil
		}
		if d.Tokens.n == 0 && !d.Cost.written {
			l.addf(pos{file: d.Tokens.file, line: d.Tokens.line, field: name}, "give tokens, cost (USD) or both")
			return nil
		}
		return &agent.Budget{Tokens: int64(d.Tokens.n), Cost: d.Cost.v}
	}
	b.Day = period(d.Day, "budgets.day")
	b.Month = period(d.Month, "budgets.month")
	t.budgets = b
}
