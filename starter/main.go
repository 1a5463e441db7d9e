// Command starter is agentflow's command-line client: a client of the
// gateway's gRPC API and of Temporal. It opens the database only for the
// operator's commands that read it (deploy rollout's build signals,
// retention audit), and assembles the process in-process
// (internal/server) only for demo, up and stack; it must not import the
// workflows or the activities.
//
//	starter run --tenant demo "What is 12.5 * 4?"   run one agent turn through Temporal and print its result
//	starter chat "What is 12.5 * 4?"                stream a turn live through the gRPC API
//	starter approve --stream turn/demo/JOB          list or decide a turn's pending approvals (gRPC API)
//	starter grants --session s1                     the approvals remembered for a session; --revoke ID ends one
//	starter answer --stream turn/demo/JOB           list or answer a turn's questions (ask_user)
//	starter cancel --stream turn/demo/JOB           stop a running turn (gRPC API)
//	starter deliveries turn/demo/JOB                where a turn's result was pushed, attempt by attempt (gRPC API)
//	starter inspect turn/demo/JOB                   a turn's page URL and timeline: steps, tokens, cost, retries, runs (HTTP API)
//	starter token new --tenant acme --roles user     make a bearer token and its AGENTFLOW_TOKENS entry
//	starter route --dry-run --page ops-console "…"  which agent a request would go to (gRPC API)
//	starter catalog apply -f catalog/               validate and apply a YAML catalog (gRPC API)
//	starter process show --tag main                 a process definition, its versions and patches (gRPC API)
//	starter usage --since 24h --by model              the tenant's model calls, tokens, cost and budgets (gRPC API)
//	starter schedule create --id ID --every 1h "…"  run a turn on a Temporal schedule
//	starter demo                                    local stack + worker + a sample turn
//	starter up                                      local stack + worker, until Ctrl-C
//	starter stack -- go test ./...                  run a command against a fresh local stack
//
// The gRPC commands read AGENTFLOW_GRPC_ADDR (default 127.0.0.1:50051) and
// AGENTFLOW_TOKEN (default dev-token, tenant demo on a local stack), or
// --addr and --token; the token names the tenant. run and schedule read
// TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE and AGENTFLOW_TASK_QUEUE like the
// worker does. demo and up run the worker and the gateway in-process on a
// local stack (DATABASE_URL and TEMPORAL_ADDRESS, when set, name servers
// to use instead of starting them) and apply the catalog through that
// gateway.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `usage: starter <command> [flags]

commands:
  run       run one agent turn and print its result
  chat      stream a turn live through the gRPC API; resumes after a dropped connection
  approve   list a turn's pending approvals, or decide one (approve --stream ID [--approval ID|--call ID] [--reject]
            [--for turn|session [--match /path=value] [--expires 1h]])
  grants    list the approvals remembered for a turn or a session, or revoke one (grants [--session S] [--all]; grants --revoke ID)
  answer    list a turn's questions, or answer one (answer --stream ID [--call ID "answer"])
  cancel    stop a running turn at its next safe point (cancel --stream ID [--reason TEXT])
  deliveries  a turn's deliveries to its deliver targets and their attempts (deliveries [--json] TURN_ID)
  inspect   a turn's page URL and its timeline as text: steps, tokens, cost, retries, approvals, runs
            (inspect [--json] [--all] TURN_ID; HTTP API: --http, AGENTFLOW_HTTP_API_ADDR, default 127.0.0.1:8080)
  token     make a bearer token: token new --tenant T [--roles user,approver,admin] [--name N]
  schedule  run an agent turn on a schedule (schedule create --id ID --every 1h|--cron SPEC "prompt"; schedule delete --id ID)
  route     show which agent a request would be routed to (route --dry-run --page P --role R [--metadata k=v] "message")
  catalog   validate and apply a YAML catalog through the gRPC API (catalog apply -f DIR|FILE [--dry-run] [--gate DATASET])
  process   read the tenant's process definitions: process list | show --tag T [--version N] [--json] | history --tag T
  deploy    roll a worker build out in steps, back again if its turns regress (deploy rollout --build B [--steps 10,50,100])
  retention sweep expired blobs, results and transcripts now (retention run), or read the audit log (retention audit)
  usage     the tenant's model calls, tokens and cost, and its budgets (usage --since 24h [--by agent|model|day|session] [--json])
  eval      evaluate an agent on a dataset: eval run -f FILE [--version N --against M] | show ID | compare A B
  demo      start a local stack and a worker, run a sample turn (exits after it when CI=true)
  up        start a local stack and a worker, and wait for Ctrl-C
  stack     start a local stack, run a command with its settings in the environment, stop it
  warm      compile what a worker would compile on its first use (PDFium, for PDF text) into the user's cache directory

chat, approve, grants, answer, deliveries, route, catalog, process, usage and eval talk to the gRPC API: --addr (AGENTFLOW_GRPC_ADDR,
default 127.0.0.1:50051) and --token (AGENTFLOW_TOKEN, default dev-token); the token names the tenant.
Run "starter <command> -h" for the command's flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	var exit exitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		os.Exit(int(exit))
	case errors.Is(err, flag.ErrHelp):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "starter:", err)
		os.Exit(1)
	}
}

// exitError ends the process with a status and no further message.
type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return exitError(2)
	}
	commands := map[string]func(context.Context, []string, io.Writer) error{
		"run":        runCmd,
		"chat":       chatCmd,
		"approve":    approveCmd,
		"grants":     grantsCmd,
		"answer":     answerCmd,
		"cancel":     cancelCmd,
		"token":      func(_ context.Context, args []string, out io.Writer) error { return tokenCmd(args, out) },
		"schedule":   scheduleCmd,
		"retention":  retentionCmd,
		"deploy":     deployCmd,
		"route":      routeCmd,
		"catalog":    catalogCmd,
		"process":    processCmd,
		"usage":      usageCmd,
		"deliveries": deliveriesCmd,
		"inspect":    inspectCmd,
		"eval":       evalCmd,
		"demo":       demoCmd,
		"up":         upCmd,
		"stack":      stackCmd,
		"warm":       func(_ context.Context, args []string, out io.Writer) error { return warmCmd(args, out) },
	}
	cmd, rest := args[0], args[1:]
	if f, ok := commands[cmd]; ok {
		return f(ctx, rest, out)
	}
	switch cmd {
	case "help", "-h", "--help":
		fmt.Fprint(out, usage)
		return nil
	default:
		fmt.Fprintf(os.Stderr, "starter: unknown command %q\n\n%s", cmd, usage)
		return exitError(2)
	}
}
