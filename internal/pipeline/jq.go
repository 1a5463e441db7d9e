package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/jqproc"
	"github.com/agentflow/agentflow/internal/words"
)

// sharedJQ runs jq_transform when Env.JQ is nil: one pool per process,
// because what it bounds (programs at once, the memory they take) is the
// process's.
var sharedJQ = sync.OnceValue(func() *jqproc.Pool { return jqproc.New(jqproc.Options{}) })

// jqTransform runs jq_transform in a child process of the engine's pool
// (see internal/jqproc): under a memory budget, at most a few at once.
// The query sees the input as JSON (a table as an array of objects). Its
// outputs are collected: none gives an empty array, one gives that value,
// several give an array of them. The run stops at Limits.JQTimeout, at
// the first error, and as soon as the outputs pass MaxRows values or
// MaxBytes of JSON. The query cannot read the environment, files or other
// inputs: gojq allows none of that unless asked.
func (e *engine) jqTransform(ctx context.Context, s step, in Value) (Value, error) {
	var input any = in.Doc
	if in.Kind == KindTable {
		input = in.Table
	}
	prog := jqproc.Program{
		Query:    s.Query,
		Input:    input,
		Timeout:  e.limits.JQTimeout,
		MaxDepth: maxDepth,
		// The wire is at most three times sizeOf's measure: a run whose
		// outputs pass this is over MaxBytes too.
		MaxBytes: 3 * e.limits.MaxBytes,
	}
	var outs []any
	size := 0
	for v, err := range e.jq.Run(ctx, prog) {
		if err != nil {
			return Value{}, e.jqError(ctx, s, err)
		}
		n, err := sizeOf(v, e.limits.MaxBytes-size)
		if errors.Is(err, errTooLarge) {
			return Value{}, tooLarge(fmt.Sprintf("the output of query %q", words.Clip(s.Query, 200)), e.limits.MaxBytes)
		}
		if err != nil {
			return Value{}, invalidf("query %q: %v", words.Clip(s.Query, 200), err)
		}
		v, err = normalize(v, 0)
		if err != nil {
			return Value{}, invalidf("query %q: %v", words.Clip(s.Query, 200), err)
		}
		size += n
		if len(outs) >= e.limits.MaxRows {
			return Value{}, invalidf("query %q emits more than %d values (the limit): use first, limit(n; ...) or a narrower select", words.Clip(s.Query, 200), e.limits.MaxRows)
		}
		outs = append(outs, v)
	}
	if err := ctx.Err(); err != nil {
		return Value{}, err
	}
	switch len(outs) {
	case 0:
		return TableOf(nil), nil
	case 1:
		return classify(outs[0]), nil
	}
	return classify(outs), nil
}

// jqError reports an error of a run: the caller's cancellation as it is,
// a wait for a slot that did not end in time as a retryable error, and
// the rest for the model.
func (e *engine) jqError(ctx context.Context, s step, err error) error {
	q := words.Clip(s.Query, 200)
	var pe *jqproc.ProgramError
	switch {
	case errors.Is(err, jqproc.ErrBusy):
		return agent.WithCode(agent.CodeUnavailable, err)
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.As(err, &pe):
		return invalidf("query %q: %s", q, words.Clip(pe.Message, 300))
	case errors.Is(err, jqproc.ErrTimeout):
		return invalidf("query %q ran past the limit of %v; make it do less (avoid recursion and large ranges)", q, e.limits.JQTimeout)
	case errors.Is(err, jqproc.ErrMemory):
		return invalidf("query %q used more than %s of memory (the per-call budget); make it build less: no repeated doubling, deep recursion or large ranges", q, mib(e.jq.Memory()))
	case errors.Is(err, jqproc.ErrTooDeep):
		return invalidf("query %q: output is nested more than %d levels deep", q, maxDepth)
	case errors.Is(err, jqproc.ErrTooLarge):
		return tooLarge(fmt.Sprintf("the output of query %q", q), e.limits.MaxBytes)
	case errors.Is(err, jqproc.ErrCrashed):
		return invalidf("query %q stopped the jq engine (%v); write it another way", q, err)
	}
	return fmt.Errorf("run query %q: %w", q, err)
}

// mib writes a byte count in MiB, or in bytes when it is not a whole
// number of MiB.
func mib(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}
