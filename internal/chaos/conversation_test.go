package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/turnclient"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// conversationRoll sends a session's messages one after another to a
// Conversation whose runs roll over at 200 history events, killing the
// worker that runs the conversation after each message from the run's
// 100th event on, until the conversation has continued as new and three
// more messages were answered. Every message must be answered once, and
// the transcript must hold each exchange once, in order.
func conversationRoll(ctx context.Context, e *env, session string) error {
	c, err := client.DialContext(ctx, client.Options{HostPort: e.top.Stack.TemporalAddress, Namespace: e.top.Stack.Namespace, Logger: quiet{}})
	if err != nil {
		return err
	}
	defer c.Close()
	convID := contract.ConversationWorkflowID(tenant, session)
	var exchanges []string
	firstRun, rolled, after := "", false, 0
	for k := 1; k <= 60 && after < 3; k++ {
		job := fmt.Sprintf("%s-%d", session, k)
		spec := computeTurn("", "")(e, job)
		var streamID string
		if k == 1 {
			// The conversation starts with a small history bound, so that
			// it rolls over within a few dozen messages.
			res, err := turnclient.SendMessage(ctx, c, contract.TaskQueue,
				agent.ConversationInput{TenantID: tenant, SessionID: session, MaxHistoryEvents: 200},
				agent.SendMessage{Prompt: spec.prompt, JobID: job})
			if err != nil {
				return fmt.Errorf("message %d: %w", k, err)
			}
			streamID = res.TurnWorkflowID
		} else {
			res, err := pb.NewAgentServiceClient(e.conns[k%len(e.conns)]).SendMessage(e.auth(ctx),
				&pb.SendMessageRequest{SessionId: session, Prompt: spec.prompt, JobId: job})
			if err != nil {
				return fmt.Errorf("message %d: %w", k, err)
			}
			streamID = res.GetStreamId()
		}
		d, err := c.DescribeWorkflowExecution(ctx, convID, "")
		if err != nil {
			return err
		}
		info := d.GetWorkflowExecutionInfo()
		firstRun = cmp.Or(firstRun, info.GetExecution().GetRunId())
		if info.GetHistoryLength() >= 100 && !rolled {
			if err := e.killConversationWorker(ctx, c, convID); err != nil {
				return fmt.Errorf("message %d: %w", k, err)
			}
		}
		run := &turnRun{job: job, workflowID: streamID, tokens: map[int64]string{}}
		if err := e.stream(ctx, run, nil, func(moment, *pb.ToolEvent) {}); err != nil {
			return fmt.Errorf("message %d: %w", k, err)
		}
		if err := e.check(ctx, trial{}, run, turnSpec{prompt: spec.prompt, want: spec.want}, false); err != nil {
			return fmt.Errorf("message %d: %w", k, err)
		}
		exchanges = append(exchanges, "user: "+spec.prompt, "assistant: "+spec.want)
		if rolled {
			after++
		} else if d, err := c.DescribeWorkflowExecution(ctx, convID, ""); err == nil && d.GetWorkflowExecutionInfo().GetExecution().GetRunId() != firstRun {
			rolled = true
		}
	}
	if !rolled {
		return errors.New("the conversation never continued as new")
	}
	got, err := e.transcript(ctx, session)
	if err != nil {
		return err
	}
	if strings.Join(got, "\n") != strings.Join(exchanges, "\n") {
		return fmt.Errorf("transcript of %d messages, want the %d exchanges once each, in order:\n%s", len(got), len(exchanges)/2, strings.Join(got, "\n"))
	}
	return nil
}

// killConversationWorker kills the worker that ran the conversation's
// latest workflow task, and starts it again in the background.
func (e *env) killConversationWorker(ctx context.Context, c client.Client, convID string) error {
	p, err := e.lastTaskWorker(ctx, c, convID)
	if err != nil || p == nil {
		return err // nil, nil: the worker already went (killed before): nothing to kill
	}
	if err := p.Kill(); err != nil {
		return err
	}
	go func() {
		time.Sleep(500 * time.Millisecond)
		if err := p.Start(ctx); err != nil {
			e.log.Warn("restart worker", zap.String("name", p.Name), zap.Error(err))
		}
	}()
	return nil
}
