package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"google.golang.org/protobuf/encoding/protojson"

	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

const deliveriesUsage = `usage: starter deliveries [--json] <turn id>
(with [--addr HOST:PORT] [--token TOKEN]; the turn id is turn/<tenant>/<job_id>, of the token's tenant)`

// deliveriesCmd prints the pushes of a turn's result to its deliver
// targets (ListDeliveries): a line per delivery, then one per attempt.
func deliveriesCmd(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlagSet("deliveries", deliveriesUsage)
	api := addAPIFlags(fs)
	asJSON := fs.Bool("json", false, "print the response as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("deliveries: want one turn id\n%s", deliveriesUsage)
	}
	c, ctx, closeConn, err := api.dial(ctx)
	if err != nil {
		return err
	}
	defer closeConn()
	resp, err := c.ListDeliveries(ctx, &pb.ListDeliveriesRequest{StreamId: fs.Arg(0)})
	if err != nil {
		return api.failed("deliveries", err)
	}
	if *asJSON {
		return printJSON(out, resp, protojson.MarshalOptions{}, "deliveries")
	}
	printDeliveries(out, fs.Arg(0), resp)
	return nil
}

// printDeliveries prints each delivery's target and status, and under it
// its attempts: number, outcome, HTTP status, time and error.
func printDeliveries(out io.Writer, streamID string, r *pb.ListDeliveriesResponse) {
	if len(r.GetDeliveries()) == 0 {
		fmt.Fprintf(out, "%s: no deliveries\n", streamID)
		return
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, d := range r.GetDeliveries() {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d attempts\t\n", d.GetTarget(), d.GetKind(), d.GetStatus(), len(d.GetAttempts()))
		for _, a := range d.GetAttempts() {
			status := "-"
			if a.GetHttpStatus() != 0 {
				status = fmt.Sprint(a.GetHttpStatus())
			}
			fmt.Fprintf(w, "  #%d\t%s\t%s\t%s\t%s\n", a.GetAttempt(), a.GetOutcome(), status, stamp(a.GetAt().AsTime()), a.GetError())
		}
	}
	_ = w.Flush()
}
