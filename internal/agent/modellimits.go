package agent

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentflow/agentflow/internal/words"
)

// ModelLimits are one governed key's limits on model calls: requests,
// input and output tokens, each over a sliding window, and calls in
// flight. A zero count is no limit. The operator declares them for the
// fleet (AGENTFLOW_MODEL_LIMITS); a tenant's catalog may narrow them for
// its own calls (Narrows).
type ModelLimits struct {
	Requests      int           `json:"requests,omitempty"`
	RequestWindow time.Duration `json:"request_window,omitempty"`
	InputTokens   int64         `json:"input_tokens,omitempty"`
	InputWindow   time.Duration `json:"input_window,omitempty"`
	OutputTokens  int64         `json:"output_tokens,omitempty"`
	OutputWindow  time.Duration `json:"output_window,omitempty"`
	Concurrent    int           `json:"concurrent,omitempty"`
}

// Names of the limits in a limit list (ParseModelLimits).
const (
	LimitRequests     = "requests"
	LimitInputTokens  = "input_tokens"
	LimitOutputTokens = "output_tokens"
	LimitConcurrent   = "concurrent"
)

// Bounds of what a limit list may say.
const (
	DefaultLimitWindow = time.Minute
	MinLimitWindow     = time.Second
	MaxLimitWindow     = 24 * time.Hour
	maxLimitCount      = 1_000_000_000_000
)

var limitNames = []string{LimitRequests, LimitInputTokens, LimitOutputTokens, LimitConcurrent}

// CheckModelKey accepts a governed key: a provider ("openai", every model
// of it) or provider:model, without spaces.
func CheckModelKey(key string) error {
	provider, model, hasModel := strings.Cut(key, ":")
	switch {
	case provider == "":
		return Errorf(CodeInvalid, "key %q: want a provider, or <provider>:<model>", key)
	case hasModel && model == "":
		return Errorf(CodeInvalid, "key %q: the model after %q is empty", key, provider+":")
	case strings.ContainsAny(key, " \t\n,=/"):
		return Errorf(CodeInvalid, "key %q: a key has no spaces, commas, '=' or '/'", key)
	}
	return nil
}

// ParseModelLimits reads one key's comma-separated limits:
// requests:<n>[/<window>], input_tokens:<n>[/<window>],
// output_tokens:<n>[/<window>] (each over a sliding window, a Go duration
// from 1s to 24h, 1m when left out) or concurrent:<n> (calls in flight).
// Every count is a whole number from 1 up: a limit of zero would stop
// every call, so it is refused; leave a limit out for none.
func ParseModelLimits(list string) (ModelLimits, error) {
	var lim ModelLimits
	seen := map[string]bool{}
	names := strings.Join(limitNames, ", ")
	for item := range strings.SplitSeq(list, ",") {
		item = strings.TrimSpace(item)
		name, value, ok := strings.Cut(item, ":")
		if !ok {
			return lim, Errorf(CodeInvalid, "limit %q: want <name>:<count>[/<window>] (names: %s)", item, names)
		}
		if !slices.Contains(limitNames, name) {
			return lim, Errorf(CodeInvalid, "unknown limit %q (names: %s)", name, names)
		}
		if seen[name] {
			return lim, Errorf(CodeInvalid, "limit %q is set twice", name)
		}
		seen[name] = true
		countText, windowText, hasWindow := strings.Cut(value, "/")
		n, err := strconv.ParseInt(strings.TrimSpace(countText), 10, 64)
		if err != nil || n < 1 || n > maxLimitCount {
			return lim, Errorf(CodeInvalid, "limit %q: count %q: want a whole number from 1 to %d (a limit of zero would stop every call; leave the limit out for none)",
				name, words.Clip(countText, 40), int64(maxLimitCount))
		}
		window := DefaultLimitWindow
		if hasWindow {
			if name == LimitConcurrent {
				return lim, Errorf(CodeInvalid, "limit %q counts calls in flight and takes no window (%q)", name, words.Clip(value, 40))
			}
			window, err = time.ParseDuration(strings.TrimSpace(windowText))
			if err != nil || window < MinLimitWindow || window > MaxLimitWindow {
				return lim, Errorf(CodeInvalid, "limit %q: window %q: want a duration from %s to %s, such as 1m or 10s",
					name, words.Clip(windowText, 40), MinLimitWindow, MaxLimitWindow)
			}
		}
		switch name {
		case LimitRequests:
			lim.Requests, lim.RequestWindow = int(n), window
		case LimitInputTokens:
			lim.InputTokens, lim.InputWindow = n, window
		case LimitOutputTokens:
			lim.OutputTokens, lim.OutputWindow = n, window
		case LimitConcurrent:
			lim.Concurrent = int(n)
		}
	}
	return lim, nil
}

// ModelLimitsFor is the key of limits that governs calls of model
// ("provider:model") and its limits: the model's own entry, else its
// provider's; ok is false when neither is declared.
func ModelLimitsFor(limits map[string]ModelLimits, model string) (key string, lim ModelLimits, ok bool) {
	if lim, ok := limits[model]; ok {
		return model, lim, true
	}
	provider, _, _ := strings.Cut(model, ":")
	if lim, ok := limits[provider]; ok {
		return provider, lim, true
	}
	return "", ModelLimits{}, false
}

// Narrows reports, naming the field, where l lets more calls through
// than limit: a tenant's limits may only narrow the operator's. A count
// over a shorter window than the operator's is taken as often as it fits
// in the operator's window (10 requests a second allow 600 a minute). A
// limit l leaves out is the operator's, which the governor applies
// beside the tenant's.
func (l ModelLimits) Narrows(limit ModelLimits) error {
	for _, f := range []struct {
		name          string
		own, max      int64
		ownWin, maxWn time.Duration
	}{
		{LimitRequests, int64(l.Requests), int64(limit.Requests), l.RequestWindow, limit.RequestWindow},
		{LimitInputTokens, l.InputTokens, limit.InputTokens, l.InputWindow, limit.InputWindow},
		{LimitOutputTokens, l.OutputTokens, limit.OutputTokens, l.OutputWindow, limit.OutputWindow},
		{LimitConcurrent, int64(l.Concurrent), int64(limit.Concurrent), 0, 0},
	} {
		if f.own == 0 || f.max == 0 || allowedIn(f.own, f.ownWin, f.maxWn) <= f.max {
			continue
		}
		return Errorf(CodeInvalid, "%s: %s allows more than the operator's %s; a tenant may only narrow it",
			f.name, limitText(f.own, f.ownWin), limitText(f.max, f.maxWn))
	}
	return nil
}

// allowedIn is the most calls (or tokens) a limit of n per window lets
// through in any span of span: n for each window the span overlaps.
func allowedIn(n int64, window, span time.Duration) int64 {
	if window <= 0 || window >= span {
		return n
	}
	// At most 86,400 windows of 1,000,000,000,000: no overflow.
	return n * int64((span+window-1)/window)
}

func limitText(n int64, window time.Duration) string {
	if window == 0 {
		return strconv.FormatInt(n, 10)
	}
	w := window.String()
	if strings.HasSuffix(w, "m0s") {
		w = w[:len(w)-2]
	}
	if strings.HasSuffix(w, "h0m") {
		w = w[:len(w)-2]
	}
	return fmt.Sprintf("%d/%s", n, w)
}
