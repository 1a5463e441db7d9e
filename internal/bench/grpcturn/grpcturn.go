// Package grpcturn streams one turn through the gateway's gRPC Stream API,
// as an application would, and checks what every client relies on: event
// indices from 1 without a gap or a repeat. The load and scale benchmarks
// drive turns with it.
package grpcturn

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// Result is what one streamed turn showed its client.
type Result struct {
	// FirstToken and Total are the times from the call to the first token
	// event and to the end of the stream.
	FirstToken, Total time.Duration
	Text              string    // the token events' text, in order
	Status            pb.Status // the last status event's
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
	var text strings.Builder
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
			text.WriteString(t.GetText())
		}
		if s := ev.GetStatus(); s != nil {
			r.Status = s.GetStatus()
		}
	}
	r.Text, r.Total = text.String(), time.Since(begin)
	return r, nil
}
