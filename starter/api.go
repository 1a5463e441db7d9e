package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/agentflow/agentflow/internal/gateway"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// apiFlags are the flags of the commands that talk to the gRPC API.
type apiFlags struct {
	addr  *string
	token *string
}

// addTurnFlags adds the flags of a command that acts on one turn: the
// API's and --stream, the turn's stream id (dialTurn requires it).
func addTurnFlags(fs *flag.FlagSet) (apiFlags, *string) {
	return addAPIFlags(fs), fs.String("stream", "", "the turn's stream id, turn/<tenant>/<job_id> (required)")
}

// dialTurn parses a turn command's args, refuses it without the turn's
// stream id, and dials the gateway (dial).
func (f apiFlags) dialTurn(ctx context.Context, fs *flag.FlagSet, args []string, streamID *string) (pb.AgentServiceClient, context.Context, func(), error) {
	if err := fs.Parse(args); err != nil {
		return nil, nil, nil, err
	}
	if *streamID == "" {
		return nil, nil, nil, fmt.Errorf("%s: --stream is required", fs.Name())
	}
	return f.dial(ctx)
}

func addAPIFlags(fs *flag.FlagSet) apiFlags {
	return apiFlags{
		addr:  fs.String("addr", cmp.Or(os.Getenv("AGENTFLOW_GRPC_ADDR"), "127.0.0.1:50051"), "gateway address (AGENTFLOW_GRPC_ADDR)"),
		token: fs.String("token", cmp.Or(os.Getenv("AGENTFLOW_TOKEN"), devToken), "bearer token (AGENTFLOW_TOKEN); it names the tenant"),
	}
}

// conn returns a connection to the gateway; it dials at the first call.
// AGENTFLOW_GRPC_CA (the CA of the gateway's certificate) or a client
// certificate (AGENTFLOW_GRPC_CERT, AGENTFLOW_GRPC_KEY) turn TLS on.
func (f apiFlags) conn() (*grpc.ClientConn, error) {
	creds := insecure.NewCredentials()
	if ca, cert, key := os.Getenv("AGENTFLOW_GRPC_CA"), os.Getenv("AGENTFLOW_GRPC_CERT"), os.Getenv("AGENTFLOW_GRPC_KEY"); ca != "" || cert != "" {
		var err error
		if creds, err = gateway.ClientTLS(ca, cert, key); err != nil {
			return nil, err
		}
	}
	conn, err := grpc.NewClient(*f.addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", *f.addr, err)
	}
	return conn, nil
}

// dialService returns a client of one of the gateway's services
// (newClient is its generated constructor), ctx with the token every call
// carries, and what closes the connection.
func dialService[C any](ctx context.Context, f apiFlags, newClient func(grpc.ClientConnInterface) C) (C, context.Context, func(), error) {
	conn, err := f.conn()
	if err != nil {
		var none C
		return none, nil, nil, err
	}
	return newClient(conn), f.ctx(ctx), func() { _ = conn.Close() }, nil
}

func (f apiFlags) dial(ctx context.Context) (pb.AgentServiceClient, context.Context, func(), error) {
	return dialService(ctx, f, pb.NewAgentServiceClient)
}

func (f apiFlags) dialCatalog(ctx context.Context) (pb.CatalogServiceClient, context.Context, func(), error) {
	return dialService(ctx, f, pb.NewCatalogServiceClient)
}

func (f apiFlags) dialEval(ctx context.Context) (pb.EvalServiceClient, context.Context, func(), error) {
	return dialService(ctx, f, pb.NewEvalServiceClient)
}

func (f apiFlags) ctx(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+*f.token)
}

// callError is a failed call of the gateway, said plainly: the status's
// message without gRPC's wrapping, and what to check when the gateway
// cannot be reached or refuses the token. It unwraps to the status error.
type callError struct {
	msg string
	err error
}

func (e *callError) Error() string { return e.msg }
func (e *callError) Unwrap() error { return e.err }

// failed describes err, returned by a call of the gateway for op.
func (f apiFlags) failed(op string, err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("%s: %w", op, err)
	}
	msg := fmt.Sprintf("%s: %s", op, st.Message())
	switch st.Code() {
	case codes.Unavailable:
		msg += fmt.Sprintf(" (gateway %s; set --addr or AGENTFLOW_GRPC_ADDR)", *f.addr)
	case codes.Unauthenticated:
		msg += " (set --token or AGENTFLOW_TOKEN)"
	}
	return &callError{msg: msg, err: err}
}

// newFlagSet is a command's flag set; its help starts with usage.
func newFlagSet(name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), usage)
		fs.PrintDefaults()
	}
	return fs
}

// printJSON prints m as indented JSON; what names the command in an
// error.
func printJSON(out io.Writer, m proto.Message, opts protojson.MarshalOptions, what string) error {
	opts.Multiline, opts.Indent = true, "  "
	b, err := opts.Marshal(m)
	if err != nil {
		return fmt.Errorf("%s: encode the response: %w", what, err)
	}
	_, err = fmt.Fprintln(out, string(b))
	return err
}
