package agent

import (
	"math"
	"strconv"
	"time"
)

// Price is what a model costs, in USD per million tokens.
type Price struct {
	Model string  `json:"model"`
	Input float64 `json:"input"`
	// CachedInput is the price of prompt tokens read from the provider's
	// prompt cache; it defaults to Input.
	CachedInput float64 `json:"cached_input"`
	Output      float64 `json:"output"`
}

// Cost is what u cost at p, in USD: uncached prompt tokens at Input,
// cached ones at CachedInput and completion tokens at Output. Reasoning
// tokens are part of the completion tokens (OpenAI counts and bills them
// as output), so they are not added again.
func (p Price) Cost(u Usage) float64 {
	cached := min(u.CachedTokens, u.PromptTokens)
	return (float64(u.PromptTokens-cached)*p.Input + float64(cached)*p.CachedInput + float64(u.CompletionTokens)*p.Output) / 1e6
}

// PriceOf returns the price of model among prices.
func PriceOf(prices []Price, model string) (Price, bool) {
	for _, p := range prices {
		if p.Model == model {
			return p, true
		}
	}
	return Price{}, false
}

// Budgets bound what a tenant's model calls may use per UTC calendar
// day and month; a nil period has no bound.
type Budgets struct {
	Day   *Budget `json:"day,omitempty"`
	Month *Budget `json:"month,omitempty"`
}

// Budget is one period's bound: tokens (prompt plus completion) and cost
// in USD; 0 is no bound.
type Budget struct {
	Tokens int64   `json:"tokens,omitempty"`
	Cost   float64 `json:"cost,omitempty"`
}

// Budget periods.
const (
	PeriodDay   = "day"
	PeriodMonth = "month"
)

// PeriodStart is when the UTC calendar period (PeriodDay or PeriodMonth)
// holding t began.
func PeriodStart(period string, t time.Time) time.Time {
	t = t.UTC()
	if period == PeriodMonth {
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// Periods lists the budgeted periods of b with their bounds.
func (b Budgets) Periods() []PeriodBudget {
	var out []PeriodBudget
	if b.Day != nil {
		out = append(out, PeriodBudget{Period: PeriodDay, Budget: *b.Day})
	}
	if b.Month != nil {
		out = append(out, PeriodBudget{Period: PeriodMonth, Budget: *b.Month})
	}
	return out
}

// PeriodBudget is the budget of one period.
type PeriodBudget struct {
	Period string
	Budget
}

// Spent is what a tenant's calls used in a period.
type Spent struct {
	Tokens int64
	Cost   float64
}

// Exceeded says which bound of b spent has reached, as a BudgetExceeded
// error; nil when none.
func (b PeriodBudget) Exceeded(tenantID string, spent Spent) error {
	if b.Tokens > 0 && spent.Tokens >= b.Tokens {
		return Errorf(CodeBudget, "tenant %q has used %d tokens this %s (UTC); its %s budget is %d tokens",
			tenantID, spent.Tokens, b.Period, b.Period, b.Tokens)
	}
	if b.Cost > 0 && spent.Cost >= b.Cost {
		return Errorf(CodeBudget, "tenant %q has spent %s USD this %s (UTC); its %s budget is %s USD",
			tenantID, formatUSD(spent.Cost), b.Period, b.Period, formatUSD(b.Cost))
	}
	return nil
}

// formatUSD writes an amount to the millionth of a dollar, without
// trailing zeros.
func formatUSD(v float64) string {
	return strconv.FormatFloat(math.Round(v*1e6)/1e6, 'f', -1, 64)
}
