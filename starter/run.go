package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"go.temporal.io/sdk/client"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/payloadstore"
	"github.com/agentflow/agentflow/internal/structured"
	"github.com/agentflow/agentflow/internal/turnclient"
)

func runCmd(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlagSet("run", `usage: starter run [flags] "prompt"`)
	var req agent.TurnRequest
	fs.StringVar(&req.TenantID, "tenant", "demo", "tenant id")
	fs.StringVar(&req.AgentID, "agent", "", "agent id (default: routed)")
	fs.StringVar(&req.SessionID, "session", "", "session id: the turn joins the session's transcript")
	fs.StringVar(&req.JobID, "job", "", "job id, the idempotency key (default: a random id)")
	fs.StringVar(&req.History, "history", "", `"load" the session's transcript or start "fresh"`)
	fs.IntVar(&req.TimeoutSec, "timeout", 0, "turn timeout in seconds (default: the agent's)")
	schema := fs.String("output-schema", "", "a JSON Schema (of a JSON object) the answer must match, or @file holding one; the answer is printed as that object")
	fs.StringVar(&req.Model, "model", "", `the model to call instead of the agent's, "provider:model" (one the agent lists in models_allowed)`)
	asJSON := fs.Bool("json", false, "print the whole TurnResult as JSON")
	address := fs.String("address", cmp.Or(os.Getenv("TEMPORAL_ADDRESS"), "127.0.0.1:7233"), "Temporal frontend host:port")
	namespace := fs.String("namespace", cmp.Or(os.Getenv("TEMPORAL_NAMESPACE"), "default"), "Temporal namespace")
	taskQueue := fs.String("task-queue", cmp.Or(os.Getenv("AGENTFLOW_TASK_QUEUE"), contract.TaskQueue), "task queue")
	if err := fs.Parse(args); err != nil {
		return err
	}
	req.Prompt = strings.Join(fs.Args(), " ")
	if *schema != "" {
		raw, err := readSchema(*schema)
		if err != nil {
			return err
		}
		req.OutputSchema = raw
	}
	if req.JobID == "" {
		req.JobID = newJobID()
	}
	req.Normalize()
	// Catch what the workflow would reject before anything is started,
	// and the ids agentflow's doors keep for themselves.
	if err := req.Validate(); err != nil {
		return err
	}
	if err := errors.Join(agent.CheckClientID("--job", req.JobID), agent.CheckClientID("--session", req.SessionID)); err != nil {
		return err
	}
	if _, err := structured.Compile(req.OutputSchema); err != nil {
		return err
	}

	c, closeClient, err := dialTemporal(ctx, *address, *namespace)
	if err != nil {
		return err
	}
	defer closeClient()
	res, err := executeTurn(ctx, c, *taskQueue, req)
	return printResult(out, res, err, *asJSON)
}

// executeTurn starts the turn (or attaches to a running one with the same
// job id) and waits for its result; a failed turn is a result too.
func executeTurn(ctx context.Context, c client.Client, taskQueue string, req agent.TurnRequest) (agent.TurnResult, error) {
	// A run of the job started elsewhere may hold its request in the
	// object store: read it as the client does.
	payloads, err := payloadDriver(ctx)
	if err != nil {
		return agent.TurnResult{}, err
	}
	run, err := turnclient.StartWith(ctx, c, payloadstore.Converter(payloads), taskQueue, req)
	if err != nil {
		return agent.TurnResult{}, err
	}
	return turnclient.Result(ctx, run)
}

// printResult prints a turn's answer and tool calls, or why it failed.
func printResult(out io.Writer, res agent.TurnResult, err error, asJSON bool) error {
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return err
		}
	} else {
		for _, tc := range res.Metadata.ToolCalls {
			fmt.Fprintf(out, "  tool %s %s → %s\n", tc.Tool, tc.Args, tc.Status)
		}
		if res.Error != nil {
			fmt.Fprintf(os.Stderr, "turn %s: %s: %s%s\n", res.Status, res.Error.Type, res.Error.Message, failedIn(res.Error))
		} else {
			answer := res.Output
			if len(res.OutputJSON) > 0 {
				answer = string(res.OutputJSON)
			}
			fmt.Fprintln(out, answer)
			summary(out, res)
		}
	}
	if res.Error != nil {
		return exitError(1)
	}
	return nil
}

// readSchema reads --output-schema: JSON, or @file naming a file of it.
func readSchema(v string) (json.RawMessage, error) {
	path, ok := strings.CutPrefix(v, "@")
	if !ok {
		return json.RawMessage(v), nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read --output-schema: %w", err)
	}
	return b, nil
}

// failedIn says which tool call, and which of its pipeline steps, caused
// a failure, when one did.
func failedIn(e *agent.TurnError) string {
	switch {
	case e.Tool == "":
		return ""
	case e.Step != "":
		return fmt.Sprintf(" (in tool %s, step %s)", e.Tool, e.Step)
	}
	return fmt.Sprintf(" (in tool %s)", e.Tool)
}

var newJobID = gateway.NewJobID
