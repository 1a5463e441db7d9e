package pipeline

import (
	"context"
	"errors"
	"fmt"

	"github.com/itchyny/gojq"
)

// jqTransform runs jq_transform. The query sees the input as JSON (a table
// as an array of objects). Its outputs are collected: none gives an empty
// array, one gives that value, several give an array of them. The run
// stops at Limits.JQTimeout, at the first error, and as soon as the
// outputs pass MaxRows values or MaxBytes of JSON. The query cannot read
// the environment, files or other inputs: gojq allows none of that unless
// asked.
func (e *engine) jqTransform(ctx context.Context, s step, in Value) (Value, error) {
	var input any
	if in.Kind == KindTable {
		input = mapsToAny(in.Table)
	} else {
		input = in.Doc
	}
	jctx, cancel := context.WithTimeout(ctx, e.limits.JQTimeout)
	defer cancel()
	iter := s.jq.RunWithContext(jctx, input)
	var outs []any
	size := 0
	for {
		v, ok := iter.Next()
		if !ok {
			break
		}
		if err, isErr := v.(error); isErr {
			var halt *gojq.HaltError
			if errors.As(err, &halt) && halt.Value() == nil {
				break // halt: stop without an error
			}
			return Value{}, e.jqError(ctx, jctx, s, err)
		}
		n, err := sizeOf(v, e.limits.MaxBytes-size)
		if errors.Is(err, errTooLarge) {
			return Value{}, tooLarge(fmt.Sprintf("the output of query %q", clip(s.Query, 200)), e.limits.MaxBytes)
		}
		if err != nil {
			return Value{}, invalidf("query %q: %v", clip(s.Query, 200), err)
		}
		v, err = normalize(v, 0)
		if err != nil {
			return Value{}, invalidf("query %q: %v", clip(s.Query, 200), err)
		}
		size += n
		if len(outs) >= e.limits.MaxRows {
			return Value{}, invalidf("query %q emits more than %d values (the limit): use first, limit(n; ...) or a narrower select", clip(s.Query, 200), e.limits.MaxRows)
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

// jqError reports an error of a running query: the caller's cancellation
// as it is, the engine's timeout and the query's own errors for the model.
func (e *engine) jqError(ctx, jctx context.Context, s step, err error) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, context.DeadlineExceeded) || jctx.Err() != nil:
		return invalidf("query %q ran past the limit of %v; make it do less (avoid recursion and large ranges)", clip(s.Query, 200), e.limits.JQTimeout)
	}
	return invalidf("query %q: %s", clip(s.Query, 200), clip(err.Error(), 300))
}
