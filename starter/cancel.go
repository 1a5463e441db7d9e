package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// cancelCmd stops a running turn at its next safe point.
func cancelCmd(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("cancel", flag.ContinueOnError)
	api, streamID := addTurnFlags(fs)
	reason := fs.String("reason", "", "why (stored with the turn's result)")
	c, ctx, closeConn, err := api.dialTurn(ctx, fs, args, streamID)
	if err != nil {
		return err
	}
	defer closeConn()
	if _, err := c.Cancel(ctx, &pb.CancelRequest{StreamId: *streamID, Reason: *reason}); err != nil {
		return api.failed("cancel", err)
	}
	fmt.Fprintf(out, "%s: cancel asked; the turn stops at its next safe point\n", *streamID)
	return nil
}
