package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// killStreamingWorker kills the worker running the turn's model call and
// starts it again a moment later.
func killStreamingWorker(ctx context.Context, e *env, at strikePoint) error {
	p, err := e.activityWorker(ctx, at.workflowID)
	if err != nil {
		return err
	}
	if err := p.Kill(); err != nil {
		return err
	}
	if at.run != nil {
		at.run.killedAt.Store(time.Now().UnixNano())
	}
	time.Sleep(500 * time.Millisecond)
	return p.Start(ctx)
}

// killGateway kills the gateway the client reads from; the client goes on
// from the other one. The killed one starts again a moment later.
func killGateway(ctx context.Context, e *env, at strikePoint) error {
	p := e.top.Gateways[at.gateway]
	if err := p.Kill(); err != nil {
		return err
	}
	time.Sleep(500 * time.Millisecond)
	return p.Start(ctx)
}

func restart(service string, down time.Duration) func(context.Context, *env, strikePoint) error {
	return func(ctx context.Context, e *env, _ strikePoint) error {
		return e.top.Stack.Restart(ctx, service, down)
	}
}

// apiDown takes the tool's API away as the turn starts and brings it back
// 3 s later: the pipeline's call fails, its activity is tried again, and
// the turn completes once the API answers.
func apiDown(ctx context.Context, e *env, _ strikePoint) error {
	e.api.Kill()
	select {
	case <-time.After(3 * time.Second):
	case <-ctx.Done():
	}
	return e.api.Restart()
}

// killMCP kills the MCP server while its slow tool works, and serves again
// on the same address: the call's activity is tried again on a new
// session.
func killMCP(ctx context.Context, e *env, _ strikePoint) error {
	// Calls of earlier runs are not this one's.
	for len(e.mcpCalls) > 0 {
		<-e.mcpCalls
	}
	for {
		select {
		case tool := <-e.mcpCalls:
			if tool != "slow" {
				continue
			}
			time.Sleep(300 * time.Millisecond) // mid-call
			e.mcp.Kill()
			return e.mcp.Restart()
		case <-ctx.Done():
			return errors.New("the MCP tool was not called")
		}
	}
}

// approveWhileDown kills every worker while a call waits for approval,
// approves it through the gateway meanwhile, and starts the workers again:
// the decision is taken once and the turn completes.
func approveWhileDown(ctx context.Context, e *env, at strikePoint) error {
	for _, w := range e.top.Workers {
		if err := w.Kill(); err != nil {
			return err
		}
	}
	decided := make(chan error, 1)
	go func() {
		c := pb.NewAgentServiceClient(e.conns[at.gateway])
		_, err := c.Approve(e.auth(ctx), &pb.ApproveRequest{StreamId: at.workflowID, CallId: at.call.GetCallId(), ApprovalId: at.call.GetApprovalId(),
			Approved: proto.Bool(true), Reason: "checked"})
		decided <- err
	}()
	time.Sleep(2 * time.Second)
	for _, w := range e.top.Workers {
		if err := w.Start(ctx); err != nil {
			return err
		}
	}
	if err := <-decided; err != nil {
		return fmt.Errorf("approve while the workers were down: %w", err)
	}
	return nil
}
