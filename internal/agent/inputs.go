package agent

import (
	"strconv"
	"strings"

	"github.com/agentflow/agentflow/internal/words"
)

// BlobInfo describes a stored blob — a file, an image, data kept by
// reference — without its bytes.
type BlobInfo struct {
	// Ref names the bytes: "cas://sha256:<hex>".
	Ref string `json:"ref"`
	// ContentType is the media type the tenant first stored the bytes
	// with.
	ContentType string `json:"content_type"`
	// Size is the length of the bytes.
	Size int64 `json:"size"`
}

// An input by index: wherever a tool takes a ref (input_ref, a join's
// refs, a request body's ref), it also takes "previous_results[i]", the
// result_ref of the i-th (from 0) of the turn request's
// context.previous_results, so that a process step can name its inputs by
// position without copying refs into its prompt.
const (
	inputIndexPrefix = "previous_results["
	// inputIndexSuffix may follow the index, as the request's JSON path
	// of the ref reads: previous_results[0].result_ref.
	inputIndexSuffix = ".result_ref"
)

// ResolveInput returns the ref that ref names: ref itself, or for
// "previous_results[i]" (or "previous_results[i].result_ref") the
// result_ref of previous[i]. A ref of that form with anything but a
// decimal index, or an index past the end, is agent.CodeInvalid with a
// message that says what the turn was given.
func ResolveInput(ref string, previous []PreviousResult) (string, error) {
	rest, ok := strings.CutPrefix(ref, inputIndexPrefix)
	if !ok {
		return ref, nil
	}
	digits, tail, ok := strings.Cut(rest, "]")
	if !ok || (tail != "" && tail != inputIndexSuffix) || !isIndex(digits) {
		return "", Errorf(CodeInvalid, "%q: want previous_results[i], i the index of one of the turn's previous results from 0, e.g. previous_results[0]", words.Clip(ref, 80))
	}
	i, err := strconv.Atoi(digits)
	switch {
	case len(previous) == 0:
		return "", Errorf(CodeInvalid, "%s: this turn was given no previous results (its request's context.previous_results is empty); name data by its ref", words.Clip(ref, 80))
	case err != nil || i >= len(previous):
		return "", Errorf(CodeInvalid, "%s: out of range: this turn was given %d previous results, previous_results[0] to previous_results[%d]",
			words.Clip(ref, 80), len(previous), len(previous)-1)
	}
	return previous[i].ResultRef, nil
}

// IsInputIndex reports whether ref names an input by index rather than by
// ref (whether or not the index is well formed).
func IsInputIndex(ref string) bool {
	return strings.HasPrefix(ref, inputIndexPrefix)
}

// isIndex accepts a decimal index without sign or leading zeros, of at
// most 9 digits (an index that large is out of range anyway).
func isIndex(s string) bool {
	if s == "" || len(s) > 9 || (len(s) > 1 && s[0] == '0') {
		return false
	}
	return !strings.ContainsFunc(s, func(c rune) bool { return c < '0' || c > '9' })
}
