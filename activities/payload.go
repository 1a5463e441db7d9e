package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// DefaultMaxResultBytes is the default budget of one activity result.
//
// A result travels to the Temporal server as a payload in a gRPC message.
// The server refuses a payload over its blob size error limit — dynamic
// config limit.blobSize.error, 2 MiB by default, with a warning over
// limit.blobSize.warn, 512 KiB (go.temporal.io/server
// common/dynamicconfig/constants.go) — and gRPC refuses a message over
// 4 MiB (grpc-go's default server receive limit, which the frontend keeps:
// "larger than max 4194304"). A refused completion is not the activity's
// failure: the attempt times out and is retried, doing its work again,
// until the turn's timeout hides the cause. The budget is half the blob
// limit, so that the rest of the message and the server's own fields fit
// too, and results stay far below it: what grows with data (a tool's
// output and data) travels by cas:// reference with a bounded preview.
const DefaultMaxResultBytes = 1 << 20

// resultChecks says, per activity, what its result is called in the error
// when it is over the budget, and the error's code. The model's reply
// cannot travel by reference (it is the turn's answer); the others are
// bounded by construction, so an oversized one is refused, clearly.
var resultChecks = map[string]struct {
	what string
	code agent.Code
}{
	contract.Route:       {"the routing decision", agent.CodeInvalid},
	contract.LoadAgent:   {"the agent's configuration", agent.CodeInvalid},
	contract.CallModel:   {"the model's reply", agent.CodeModelRejected},
	contract.ExecuteTool: {"the tool's result", agent.CodeInvalid},
	contract.SaveResult:  {"the turn's result", agent.CodeInvalid},
}

// checkResult is the one check of activity results: nil when the result
// of activity name fits the budget, else a non-retryable error that says
// what is too large, by how much, and which part of it weighs most ("the
// model's reply is 3.1 MiB, 3.1 MiB of it in content; the limit is
// 1 MiB"). It measures the result as the worker sends it, encoded by
// the SDK's default data converter, which the worker uses, and returns
// it so encoded. The default converter is the right one even with an
// object store: the SDK's external storage (internal/payloadstore) takes
// the payload after the converter, so a result is measured by its own
// size, not its reference's, and is encoded once.
func (a *Activities) checkResult(ctx context.Context, name string, out any) (*commonpb.Payload, error) {
	p, err := converter.GetDefaultDataConverter().ToPayloads(out)
	if err != nil {
		return nil, fmt.Errorf("encode the result of %s: %w", name, err)
	}
	size := proto.Size(p)
	if size <= a.maxResultBytes {
		return p.GetPayloads()[0], nil
	}
	c, ok := resultChecks[name]
	if !ok {
		c.what, c.code = "the result of "+name, agent.CodeInternal
	}
	msg := fmt.Sprintf("%s is %s", c.what, agent.FormatBytes(size))
	if len(p.GetPayloads()) == 1 {
		if part, n := largestPart(p.GetPayloads()[0].GetData(), 4); part != "" {
			msg += fmt.Sprintf(", %s of it in %s", agent.FormatBytes(n), part)
		}
	}
	a.log(ctx).Warn("activity result over the payload budget", zap.String("activity", name),
		zap.Int("bytes", size), zap.Int("limit", a.maxResultBytes))
	return nil, agent.Errorf(c.code, "%s; the limit is %s", msg, agent.FormatBytes(a.maxResultBytes))
}

// checked registers an activity with its result checked (checkResult)
// and its errors classified (contract.Failure), in that order, so that a
// result over the budget fails the attempt for good, with its reason,
// instead of being refused by the server. The result goes to the SDK as
// checkResult encoded it (a raw value the SDK sends as it is), so that it
// is encoded once.
func checked[In, Out any](a *Activities, name string, f func(context.Context, In) (Out, error)) func(context.Context, In) (converter.RawValue, error) {
	return func(ctx context.Context, in In) (converter.RawValue, error) {
		out, err := f(ctx, in)
		if err != nil {
			return converter.RawValue{}, contract.Failure(err)
		}
		p, err := a.checkResult(ctx, name, out)
		if err != nil {
			return converter.RawValue{}, contract.Failure(err)
		}
		return converter.NewRawValue(p), nil
	}
}

// largestPart names the heaviest part of a JSON value, following the
// heaviest field or item down at most depth levels: "content",
// "data.sample", "tool_calls[2].arguments". It returns "" for a value
// with no parts.
func largestPart(data []byte, depth int) (string, int) {
	path, size := "", 0
	for ; depth > 0; depth-- {
		name, part, ok := heaviest(data)
		if !ok {
			break
		}
		if path != "" && !strings.HasPrefix(name, "[") {
			path += "."
		}
		path, size, data = path+name, len(part), part
	}
	return path, size
}

// heaviest returns the largest field of a JSON object (its name) or item
// of an array ("[i]"), and false for any other value.
func heaviest(data []byte) (string, json.RawMessage, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	open, err := dec.Token()
	if err != nil || (open != json.Delim('{') && open != json.Delim('[')) {
		return "", nil, false
	}
	var name string
	var largest json.RawMessage
	for i := 0; dec.More(); i++ {
		key := "[" + strconv.Itoa(i) + "]"
		if open == json.Delim('{') {
			t, err := dec.Token()
			if err != nil {
				return "", nil, false
			}
			key, _ = t.(string)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return "", nil, false
		}
		if len(v) > len(largest) {
			name, largest = key, v
		}
	}
	return name, largest, largest != nil
}
