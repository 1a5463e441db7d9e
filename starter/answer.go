package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// answerCmd lists a turn's questions waiting for an answer (ask_user
// calls), or answers one.
func answerCmd(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("answer", flag.ContinueOnError)
	api, streamID := addTurnFlags(fs)
	callID := fs.String("call", "", "the question to answer (its call id); without it, list what waits")
	c, ctx, closeConn, err := api.dialTurn(ctx, fs, args, streamID)
	if err != nil {
		return err
	}
	defer closeConn()
	text := strings.TrimSpace(strings.Join(fs.Args(), " "))
	if *callID != "" && text == "" {
		return fmt.Errorf("answer: the answer is required: starter answer --stream ID --call ID \"answer\"")
	}
	if *callID == "" {
		resp, err := c.ListPendingQuestions(ctx, &pb.ListPendingQuestionsRequest{StreamId: *streamID})
		if err != nil {
			return fmt.Errorf("answer: %w", err)
		}
		if len(resp.GetQuestions()) == 0 {
			fmt.Fprintln(out, "no question waits for an answer")
		}
		for _, q := range resp.GetQuestions() {
			fmt.Fprintf(out, "%s  %s%s  (%s role, until %s)\n", q.GetCallId(), q.GetQuestion(), describeChoices(q.GetChoices(), q.GetAllowOther()),
				q.GetRole(), q.GetDeadline().AsTime().Local().Format("15:04:05"))
		}
		return nil
	}
	// The answer is recorded under the name and roles of the token's holder.
	resp, err := c.Answer(ctx, &pb.AnswerRequest{StreamId: *streamID, CallId: *callID, Answer: text})
	if err != nil {
		return fmt.Errorf("answer: %w", err)
	}
	fmt.Fprintf(out, "%s %s\n", resp.GetCallId(), resp.GetOutcome())
	return nil
}

// describeChoices says what answers a question takes.
func describeChoices(choices []string, other bool) string {
	switch {
	case len(choices) == 0:
		return ""
	case other:
		return " [" + strings.Join(choices, " | ") + " | your own]"
	default:
		return " [" + strings.Join(choices, " | ") + "]"
	}
}
