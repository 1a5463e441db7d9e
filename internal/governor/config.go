package governor

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentflow/agentflow/internal/store"
)

// EnvLimits is the variable that declares the limits (ParseLimits).
const EnvLimits = "AGENTFLOW_MODEL_LIMITS"

// Names of the limits in EnvLimits.
const (
	LimitRequests     = "requests"
	LimitInputTokens  = "input_tokens"
	LimitOutputTokens = "output_tokens"
	LimitConcurrent   = "concurrent"
)

// Bounds of what EnvLimits may say.
const (
	DefaultWindow = time.Minute
	MinWindow     = time.Second
	MaxWindow     = 24 * time.Hour
	maxCount      = 1_000_000_000_000
)

// Limits are the governed keys and their limits. The zero value governs
// nothing.
type Limits struct {
	keys map[string]store.GovernorLimits
}

// ParseLimits reads EnvLimits: entries separated by ";", each a key, "=",
// and its limits separated by ",":
//
//	openai=requests:500/1m,input_tokens:200000/1m,output_tokens:50000/1m,concurrent:20;anthropic:claude-sonnet-4-5=requests:50
//
// A key is a provider (every model of it) or provider:model (that model,
// which then answers to its own entry only). A limit is
// requests:<n>[/<window>], input_tokens:<n>[/<window>],
// output_tokens:<n>[/<window>] (each over a sliding window, a Go duration
// from 1s to 24h, 1m when left out) or concurrent:<n> (calls in flight).
// Every count is a whole number from 1 up: a limit of zero would stop
// every call, so it is refused; leave a limit out for none. An empty
// string governs nothing.
func ParseLimits(s string) (Limits, error) {
	out := Limits{keys: map[string]store.GovernorLimits{}}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for entry := range strings.SplitSeq(s, ";") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		key, list, ok := strings.Cut(entry, "=")
		key = strings.TrimSpace(key)
		if !ok || strings.TrimSpace(list) == "" {
			return Limits{}, fmt.Errorf("%s: entry %q: want <provider>[:<model>]=<limit>[,<limit>…]", EnvLimits, entry)
		}
		if err := checkKey(key); err != nil {
			return Limits{}, fmt.Errorf("%s: %w", EnvLimits, err)
		}
		if _, dup := out.keys[key]; dup {
			return Limits{}, fmt.Errorf("%s: key %q is declared twice", EnvLimits, key)
		}
		lim, err := parseKeyLimits(list)
		if err != nil {
			return Limits{}, fmt.Errorf("%s: key %q: %w", EnvLimits, key, err)
		}
		out.keys[key] = lim
	}
	return out, nil
}

// checkKey accepts provider or provider:model, without spaces.
func checkKey(key string) error {
	provider, model, hasModel := strings.Cut(key, ":")
	switch {
	case provider == "":
		return fmt.Errorf("key %q: want a provider, or <provider>:<model>", key)
	case hasModel && model == "":
		return fmt.Errorf("key %q: the model after %q is empty", key, provider+":")
	case strings.ContainsAny(key, " \t\n,=/"):
		return fmt.Errorf("key %q: a key has no spaces, commas, '=' or '/'", key)
	}
	return nil
}

// parseKeyLimits reads one key's comma-separated limits.
func parseKeyLimits(list string) (store.GovernorLimits, error) {
	var lim store.GovernorLimits
	seen := map[string]bool{}
	for item := range strings.SplitSeq(list, ",") {
		item = strings.TrimSpace(item)
		name, value, ok := strings.Cut(item, ":")
		if !ok {
			return lim, fmt.Errorf("limit %q: want <name>:<count>[/<window>] (names: %s, %s, %s, %s)", item,
				LimitRequests, LimitInputTokens, LimitOutputTokens, LimitConcurrent)
		}
		if !slices.Contains([]string{LimitRequests, LimitInputTokens, LimitOutputTokens, LimitConcurrent}, name) {
			return lim, fmt.Errorf("unknown limit %q (names: %s, %s, %s, %s)", name,
				LimitRequests, LimitInputTokens, LimitOutputTokens, LimitConcurrent)
		}
		if seen[name] {
			return lim, fmt.Errorf("limit %q is set twice", name)
		}
		seen[name] = true
		countText, windowText, hasWindow := strings.Cut(value, "/")
		n, err := strconv.ParseInt(strings.TrimSpace(countText), 10, 64)
		if err != nil || n < 1 || n > maxCount {
			return lim, fmt.Errorf("limit %q: count %q: want a whole number from 1 to %d (a limit of zero would stop every call; leave the limit out for none)", name, countText, int64(maxCount))
		}
		window := DefaultWindow
		if hasWindow {
			if name == LimitConcurrent {
				return lim, fmt.Errorf("limit %q counts calls in flight and takes no window (%q)", name, value)
			}
			window, err = time.ParseDuration(strings.TrimSpace(windowText))
			if err != nil || window < MinWindow || window > MaxWindow {
				return lim, fmt.Errorf("limit %q: window %q: want a duration from %s to %s, such as 1m or 10s", name, windowText, MinWindow, MaxWindow)
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

// For is the key that governs calls of model ("provider:model") and its
// limits: the model's own entry, else its provider's; ok is false when
// neither is declared.
func (l Limits) For(model string) (key string, lim store.GovernorLimits, ok bool) {
	if lim, ok := l.keys[model]; ok {
		return model, lim, true
	}
	provider, _, _ := strings.Cut(model, ":")
	if lim, ok := l.keys[provider]; ok {
		return provider, lim, true
	}
	return "", store.GovernorLimits{}, false
}

// Empty reports whether l governs nothing.
func (l Limits) Empty() bool { return len(l.keys) == 0 }

// Keys are the governed keys, sorted.
func (l Limits) Keys() []string { return slices.Sorted(maps.Keys(l.keys)) }
