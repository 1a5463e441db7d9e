package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"google.golang.org/protobuf/proto"

	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// approveCmd lists a turn's pending approvals, or decides one.
func approveCmd(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("approve", flag.ContinueOnError)
	api := addAPIFlags(fs)
	streamID := fs.String("stream", "", "the turn's stream id, turn/<tenant>/<job_id> (required)")
	callID := fs.String("call", "", "the tool call to decide; without it, list what waits")
	reject := fs.Bool("reject", false, "reject the call instead of approving it")
	reason := fs.String("reason", "", "why (stored with the decision; the model sees it on a rejection)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *streamID == "" {
		return fmt.Errorf("approve: --stream is required")
	}
	c, closeConn, err := api.dial()
	if err != nil {
		return err
	}
	defer closeConn()
	ctx = api.ctx(ctx)
	if *callID == "" {
		resp, err := c.ListPendingApprovals(ctx, &pb.ListPendingApprovalsRequest{StreamId: *streamID})
		if err != nil {
			return fmt.Errorf("approve: %w", err)
		}
		if len(resp.GetApprovals()) == 0 {
			fmt.Fprintln(out, "nothing waits for approval")
		}
		for _, p := range resp.GetApprovals() {
			fmt.Fprintf(out, "%s  %s %s  (until %s)\n", p.GetCallId(), p.GetTool(), p.GetArgsJson(), p.GetDeadline().AsTime().Local().Format("15:04:05"))
		}
		return nil
	}
	// The decision is recorded under the name of the token's holder.
	resp, err := c.Approve(ctx, &pb.ApproveRequest{StreamId: *streamID, CallId: *callID, Approved: proto.Bool(!*reject), Reason: *reason})
	if err != nil {
		return fmt.Errorf("approve: %w", err)
	}
	fmt.Fprintf(out, "%s %s\n", resp.GetCallId(), resp.GetOutcome())
	return nil
}
