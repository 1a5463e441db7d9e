package main

import (
	"context"
	"flag"
	"fmt"
	"io"
)

// upCmd starts the local stack and a worker and waits for Ctrl-C.
func upCmd(ctx context.Context, args []string, out io.Writer) error {
	env, err := startLocalFlags(ctx, out, flag.NewFlagSet("up", flag.ContinueOnError), args)
	if err != nil {
		return stopped(ctx, out, err)
	}
	defer env.close()
	env.printHowTo(out)
	env.untilStopped(ctx, out)
	return nil
}

// stoppedLine is what up and demo print last when they stop as asked.
const stoppedLine = "agentflow stopped."

// untilStopped waits for Ctrl-C (SIGINT) or SIGTERM, then stops what
// runs and says so: a stop the user asked for is no failure, so the
// command exits 0 (and `task up` ends without an error of its own).
func (l *local) untilStopped(ctx context.Context, out io.Writer) {
	fmt.Fprintln(out, "\nPress Ctrl-C to stop.")
	<-ctx.Done()
	fmt.Fprintln(out, "\nStopping…")
	l.close()
	fmt.Fprintln(out, stoppedLine)
}

// stopped is err, unless ctx was ended by Ctrl-C or SIGTERM while up or
// demo was starting or running its session: then the user stopped it,
// which stopped says and is no failure.
func stopped(ctx context.Context, out io.Writer, err error) error {
	if err == nil || ctx.Err() == nil {
		return err
	}
	fmt.Fprintln(out, "\n"+stoppedLine)
	return nil
}
