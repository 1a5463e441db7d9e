// Package grpcturn streams one turn through the gateway's gRPC Stream API,
// as an application would, and checks what every client relies on: event
// indices from 1 without a gap or a repeat. The load and scale benchmarks
// drive turns with it.
//
// It imports only the generated API (proto/agentflow/v1), as an
// application's client does: nothing of the gateway or the workflows.
package grpcturn

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// Result is what one streamed turn showed its client.
type Result struct {
	// FirstToken and Total are the times from the call to the first token
	// event and to the end of the stream.
	FirstToken, Total time.Duration
	// Text is the token events' text, in order, without the text a
	// RETRYING status voided (from its void_from index on), as a client
	// shows it.
	Text   string
	Status pb.Status // the last status event's
	// Retries counts the RETRYING statuses: model calls tried again.
	Retries int
}

// Stream starts req with Stream and reads the stream to its end.
func Stream(ctx context.Context, api pb.AgentServiceClient, req *pb.TurnRequest) (Result, error) {
	begin := time.Now()
	st, err := api.Stream(ctx, &pb.StreamRequest{Turn: req})
	if err != nil {
		return Result{}, err
	}
	var r Result
	var last int64
	var tokens []token
	for {
		ev, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return r, fmt.Errorf("job %s: %w", req.GetJobId(), err)
		}
		if i := ev.GetMeta().GetEventIndex(); i != last+1 {
			return r, fmt.Errorf("job %s: event %d after %d", req.GetJobId(), i, last)
		}
		last++
		if t := ev.GetToken(); t != nil {
			if r.FirstToken == 0 {
				r.FirstToken = time.Since(begin)
			}
			tokens = append(tokens, token{last, t.GetText()})
		}
		if s := ev.GetStatus(); s != nil {
			r.Status = s.GetStatus()
			if s.GetStatus() == pb.Status_STATUS_RETRYING {
				r.Retries++
				tokens = slices.DeleteFunc(tokens, func(t token) bool { return t.index >= s.GetVoidFrom() })
			}
		}
	}
	var text strings.Builder
	for _, t := range tokens {
		text.WriteString(t.text)
	}
	r.Text, r.Total = text.String(), time.Since(begin)
	return r, nil
}

type token struct {
	index int64
	text  string
}
