package agent

import (
	"fmt"
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

// Exceeded says which bound of b a call may not pass, as a BudgetExceeded
// error; nil when none. spent is what the tenant's calls used this
// period, reserved what the calls in flight hold, want what this call
// would reserve. The call passes only when its reservation fits beside
// the others': a budget is a hard cap, so calls made at once, each
// settled to at most what it reserved, never pass it together. A call
// whose worst case is larger than the budget left is refused even when
// its answer might have fitted.
func (b PeriodBudget) Exceeded(tenantID string, spent, reserved, want Spent) error {
	if b.Tokens > 0 && spent.Tokens+reserved.Tokens+want.Tokens > b.Tokens {
		held := ""
		if reserved.Tokens > 0 {
			held = fmt.Sprintf(" and calls in flight reserve %d more", reserved.Tokens)
		}
		return Errorf(CodeBudget, "tenant %q has used %d tokens this %s (UTC)%s; its %s budget is %d tokens; this call would reserve %d more",
			tenantID, spent.Tokens, b.Period, held, b.Period, b.Tokens, want.Tokens)
	}
	if b.Cost > 0 && spent.Cost+reserved.Cost+want.Cost > b.Cost+costSlack {
		held := ""
		if reserved.Cost > 0 {
			held = " and calls in flight reserve " + formatUSD(reserved.Cost) + " USD more"
		}
		return Errorf(CodeBudget, "tenant %q has spent %s USD this %s (UTC)%s; its %s budget is %s USD; this call would reserve %s USD more",
			tenantID, formatUSD(spent.Cost), b.Period, held, b.Period, formatUSD(b.Cost), formatUSD(want.Cost))
	}
	return nil
}

// costSlack is the float rounding a cost sum may carry (1e-9 USD): a call
// that fits a cost budget exactly is not refused for it.
const costSlack = 1e-9

// DefaultReservedOutputTokens is the output a model call of a tenant with
// a budget is bounded to (its max_tokens) and reserves when its agent
// sets no max_output_tokens: without a bound sent to the provider, a
// reservation would bound nothing. 4096 is the output limit many
// providers apply by default; an agent that writes longer answers sets
// max_output_tokens.
const DefaultReservedOutputTokens = 4096

// Reservation estimates, as overhead bytes, the framing providers add
// around each message and each tool they are sent (role markers, the
// tool's JSON wrapper); bytesPerToken is the bytes a token is taken to
// hold when a prompt is counted.
const (
	messageOverheadBytes = 12
	toolOverheadBytes    = 24
	bytesPerToken        = 3
)

// PromptTokens is an upper estimate of the prompt tokens msgs and the
// schemas of tools make when sent to a model: their bytes (text, tool
// calls and their arguments, names, descriptions, JSON Schemas, plus
// messageOverheadBytes a message and toolOverheadBytes a tool) divided by
// 3, rounded up. The BPE tokenizers of current models hold about 4 bytes
// a token of English and 3 or more of code and JSON, so this counts more
// tokens than the provider will for such text; text that tokenizes worse
// (some non-Latin scripts) is counted short, and its call is settled to
// what the provider reports all the same. No tokenizer is used: each
// provider has its own, and the estimate must hold for all of them.
func PromptTokens(msgs []Message, tools []Tool) int {
	n := 0
	for _, m := range msgs {
		n += messageOverheadBytes + len(m.Role) + len(m.Content) + len(m.ToolCallID) + len(m.Name)
		for _, c := range m.ToolCalls {
			n += len(c.ID) + len(c.Name) + len(c.Arguments)
		}
	}
	for _, t := range tools {
		n += toolOverheadBytes + len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	return (n + bytesPerToken - 1) / bytesPerToken
}

// Reserve is what a call of up to maxOutput completion tokens whose
// prompt counts promptTokens may use at most: its tokens, and its cost at
// price (0 without one; no prompt tokens are taken to be cached).
func Reserve(promptTokens, maxOutput int, price *Price) Spent {
	r := Spent{Tokens: int64(promptTokens) + int64(maxOutput)}
	if price != nil {
		r.Cost = price.Cost(Usage{PromptTokens: promptTokens, CompletionTokens: maxOutput})
	}
	return r
}

// formatUSD writes an amount to the millionth of a dollar, without
// trailing zeros.
func formatUSD(v float64) string {
	return strconv.FormatFloat(math.Round(v*1e6)/1e6, 'f', -1, 64)
}
