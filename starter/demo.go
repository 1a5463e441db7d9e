package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// demoCmd runs the sample session on a local stack.
func demoCmd(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	wait := fs.Bool("wait", os.Getenv("CI") != "true", "keep running after the session until Ctrl-C")
	env, err := startLocalFlags(ctx, out, fs, args)
	if err != nil {
		return stopped(ctx, out, err)
	}
	defer env.close()
	if err := env.demoSession(ctx, out); err != nil {
		return stopped(ctx, out, err)
	}
	env.printHowTo(out)
	if !*wait {
		fmt.Fprintln(out, "\nStopping (CI=true, or -wait=false): run `go tool task up` to keep a stack running.")
		return nil
	}
	env.untilStopped(ctx, out)
	return nil
}

// demoSession runs the sample session: two turns of a conversation, a
// call approved through the API, and two data turns by reference.
func (l *local) demoSession(ctx context.Context, out io.Writer) error {
	// A session of its own per run: a conversation left by an earlier run
	// may belong to a worker on another task queue that is gone.
	run := newJobID()
	prompts := []string{"What is 12.5 * 4?", "What is (1.1 + 2.2) * 3 / 4?"}
	for i, p := range prompts {
		req := agent.TurnRequest{TenantID: "demo", SessionID: "demo-" + run, JobID: fmt.Sprintf("demo-%s-%d", run, i+1), Prompt: p}
		req.Normalize()
		fmt.Fprintf(out, "\n> %s\n", p)
		if err := l.chat(ctx, out, req); err != nil {
			return err
		}
	}
	if err := l.approvalDemo(ctx, out); err != nil {
		return err
	}
	if err := l.dataDemo(ctx, out, run); err != nil {
		return err
	}
	fmt.Fprintln(out, "\nThe demo session passed: two turns of a conversation, a call approved through the API, and two data turns by reference.")
	return nil
}

// chat streams a turn through the local gateway, as any client would.
func (l *local) chat(ctx context.Context, out io.Writer, req agent.TurnRequest) error {
	api := l.api("demo")
	c, ctx, closeConn, err := api.dial(ctx)
	if err != nil {
		return err
	}
	defer closeConn()
	return chat(ctx, c, &pb.TurnRequest{JobId: req.JobID, SessionId: req.SessionID, AgentId: req.AgentID, Prompt: req.Prompt},
		out, os.Stderr)
}

// dataDemo runs two turns of the data agent in one session: the first
// fetches flights and keeps the cheapest by ref, the second filters that
// result by ref without fetching again.
func (l *local) dataDemo(ctx context.Context, out io.Writer, run string) error {
	for i, p := range []string{"fetch flights from NYC to LAX, sort by price, show top 3", "now filter those under $230"} {
		req := agent.TurnRequest{TenantID: "demo", SessionID: "demo-data-" + run, JobID: fmt.Sprintf("demo-%s-data-%d", run, i+1),
			AgentID: "data", Prompt: p}
		fmt.Fprintf(out, "\n> (agent data) %s\n", p)
		if err := l.chat(ctx, out, req); err != nil {
			return err
		}
	}
	return nil
}

// approvalDemo runs a turn of the ops agent, whose calculator needs a
// person's approval, and approves the call through the API as that person.
func (l *local) approvalDemo(ctx context.Context, out io.Writer) error {
	prompt := "What is 1200 * 1.07?"
	job := "demo-" + newJobID() + "-ops"
	fmt.Fprintf(out, "\n> (agent ops, whose calculator needs approval) %s\n", prompt)
	api := l.api("demo")
	c, actx, closeConn, err := api.dial(ctx)
	if err != nil {
		return err
	}
	defer closeConn()
	streamID := contract.TurnWorkflowID("demo", job)
	approved := make(chan error, 1)
	go func() {
		// A reviewer elsewhere: waits for the call, then approves it.
		for {
			resp, err := c.ListPendingApprovals(actx, &pb.ListPendingApprovalsRequest{StreamId: streamID})
			if err == nil && len(resp.GetApprovals()) > 0 {
				p := resp.GetApprovals()[0]
				_, err = c.Approve(actx, &pb.ApproveRequest{StreamId: streamID, CallId: p.GetCallId(), ApprovalId: p.GetApprovalId(),
					Approved: proto.Bool(true), Reason: "the figures look right"})
				approved <- err
				return
			}
			select {
			case <-time.After(100 * time.Millisecond):
			case <-actx.Done():
				approved <- actx.Err()
				return
			}
		}
	}()
	if err := chat(actx, c, &pb.TurnRequest{JobId: job, AgentId: "ops", Prompt: prompt}, out, os.Stderr); err != nil {
		return err
	}
	if err := <-approved; err != nil {
		return fmt.Errorf("approve: %w", err)
	}
	// The approver is the token's name ("dev"), which the decision's event
	// above already says: this line says only how it came.
	fmt.Fprintln(out, "  (approved through the gRPC API, as `starter approve --stream "+streamID+"` does)")
	return nil
}
