package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// chatCmd streams a turn live and resumes after a dropped connection.
func chatCmd(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("chat", flag.ContinueOnError)
	api := addAPIFlags(fs)
	agentID := fs.String("agent", "", "agent id (default: routed)")
	session := fs.String("session", "", "session id: the message goes to the session's conversation")
	jobID := fs.String("job", "", "job id (default: a new one); the same job id attaches to its turn")
	if err := fs.Parse(args); err != nil {
		return err
	}
	prompt := strings.TrimSpace(strings.Join(fs.Args(), " "))
	if prompt == "" {
		return fmt.Errorf("chat: a prompt is required: starter chat [flags] \"prompt\"")
	}
	if *jobID == "" && *session == "" {
		*jobID = newJobID() // a session's conversation numbers its messages
	}
	c, ctx, closeConn, err := api.dial(ctx)
	if err != nil {
		return err
	}
	defer closeConn()
	req := &pb.TurnRequest{JobId: *jobID, AgentId: *agentID, SessionId: *session, Prompt: prompt}
	return chat(ctx, c, req, out, os.Stderr)
}

// chat streams a turn. When the connection drops it reconnects: with
// Resume from the last event it got, or — before the first event — by
// streaming the same job again, which attaches to the running turn.
func chat(ctx context.Context, c pb.AgentServiceClient, req *pb.TurnRequest, out, errOut io.Writer) error {
	r := &renderer{out: out, dim: faintOK(out)}
	var streamID string
	var last int64
	var usage int
	backoff := 200 * time.Millisecond
	failures := 0
	if req.GetSessionId() != "" {
		// A session's messages go through its conversation, which answers
		// them in order; the turn is followed once it has started.
		sent, err := c.SendMessage(ctx, &pb.SendMessageRequest{SessionId: req.GetSessionId(), Prompt: req.GetPrompt(),
			JobId: req.GetJobId(), AgentId: req.GetAgentId(), Context: req.GetContext()})
		if err != nil {
			return fmt.Errorf("chat: %w", err)
		}
		streamID = sent.GetStreamId()
	}
	for {
		var s grpc.ServerStreamingClient[pb.StreamEvent]
		var err error
		if streamID == "" {
			s, err = c.Stream(ctx, &pb.StreamRequest{Turn: req})
		} else {
			s, err = c.Resume(ctx, &pb.ResumeRequest{StreamId: streamID, AfterIndex: last})
		}
		for err == nil {
			var ev *pb.StreamEvent
			if ev, err = s.Recv(); err != nil {
				break
			}
			e := gateway.FromPBEvent(ev)
			if e.Index != last+1 {
				continue // never shown twice
			}
			streamID, last = e.StreamID, e.Index
			backoff, failures = 200*time.Millisecond, 0
			if e.Usage != nil {
				usage += e.Usage.TotalTokens
			}
			r.event(e)
			if e.Terminal() {
				if e.Status == agent.StreamFailed {
					return exitError(1)
				}
				fmt.Fprintf(out, "  [%s · %d tokens]\n", streamID, usage)
				return nil
			}
		}
		failures++
		waiting := last == 0 && status.Code(err) == codes.NotFound // the turn has not started yet
		if !(retryable(err) || waiting) || ctx.Err() != nil || failures > maxReconnects {
			return fmt.Errorf("chat: %w", err)
		}
		delay := 100 * time.Millisecond // a queued turn starts soon
		if !waiting {
			fmt.Fprintf(errOut, "\n  [connection lost (%v); resuming after event %d]\n", status.Code(err), last)
			delay, backoff = backoff, min(backoff*2, 5*time.Second)
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// maxReconnects bounds reconnection attempts without progress.
const maxReconnects = 100

// retryable: the connection broke, or the stream ended without its
// terminal event; not the caller's mistake.
func retryable(err error) bool {
	if errors.Is(err, io.EOF) {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.Internal, codes.Unknown, codes.Aborted, codes.Canceled:
		return true
	}
	return false
}
