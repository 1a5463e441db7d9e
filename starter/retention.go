package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/store"
)

const retentionUsage = `usage: starter retention run [--address HOST:PORT] [--namespace NS] [--task-queue Q]
       starter retention audit [--database-url URL] [--tenant T] [--run ID] [--limit N] [--json]
run sweeps now what the TTLs have expired (a Retention workflow, as the schedule starts) and prints what it deleted;
audit prints the audit log, newest first: what each sweep's batches deleted (DATABASE_URL, the operator's).`

// retentionCmd runs a retention sweep now, or reads the audit log.
func retentionCmd(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 || (args[0] != "run" && args[0] != "audit") {
		return fmt.Errorf("retention: want run or audit\n%s", retentionUsage)
	}
	fs := newFlagSet("retention "+args[0], retentionUsage)
	if args[0] == "audit" {
		return auditCmd(ctx, fs, args[1:], out)
	}
	address := fs.String("address", cmp.Or(os.Getenv("TEMPORAL_ADDRESS"), "127.0.0.1:7233"), "Temporal frontend host:port")
	namespace := fs.String("namespace", cmp.Or(os.Getenv("TEMPORAL_NAMESPACE"), "default"), "Temporal namespace")
	taskQueue := fs.String("task-queue", cmp.Or(os.Getenv("AGENTFLOW_TASK_QUEUE"), contract.TaskQueue), "task queue")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("retention run: unexpected argument %q\n%s", fs.Arg(0), retentionUsage)
	}
	c, closeClient, err := dialTemporal(ctx, *address, *namespace)
	if err != nil {
		return err
	}
	defer closeClient()
	id := contract.RetentionScheduleID(*taskQueue) + "-now-" + time.Now().UTC().Format("2006-01-02T15:04:05Z")
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: *taskQueue, WorkflowRunTimeout: 24 * time.Hour},
		contract.Retention, contract.RetentionInput{})
	if err != nil {
		return fmt.Errorf("retention run: %w", err)
	}
	var res contract.RetentionResult
	if err := run.Get(ctx, &res); err != nil {
		return fmt.Errorf("retention run %s: %w", id, err)
	}
	fmt.Fprintf(out, "sweep %s\n", id)
	if len(res.Swept) == 0 {
		fmt.Fprintln(out, "nothing had expired")
		return nil
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TENANT\tKIND\tDELETED\tBLOBS FREED\tOBJECTS")
	for _, s := range res.Swept {
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\n", s.TenantID, s.Kind, s.Deleted, s.Freed, s.Objects)
	}
	return w.Flush()
}

// auditCmd prints the audit log.
func auditCmd(ctx context.Context, fs *flag.FlagSet, args []string, out io.Writer) error {
	dbURL := fs.String("database-url", os.Getenv("DATABASE_URL"), "the PostgreSQL database (DATABASE_URL)")
	tenant := fs.String("tenant", "", "only this tenant's rows")
	runID := fs.String("run", "", "only this sweep's rows (its workflow id)")
	limit := fs.Int("limit", 100, "rows at most")
	asJSON := fs.Bool("json", false, "print the rows as JSON, one a line, with every ref")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 || *dbURL == "" || *limit <= 0 {
		return fmt.Errorf("retention audit: want --database-url (or DATABASE_URL) and a positive --limit\n%s", retentionUsage)
	}
	st, err := store.Open(ctx, *dbURL, store.Options{MaxConns: 2})
	if err != nil {
		return err
	}
	defer st.Close()
	rows, err := st.AuditLog(ctx, store.AuditQuery{TenantID: *tenant, RunID: *runID, Limit: *limit})
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		for _, r := range rows {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "AT\tRUN\tTENANT\tKIND\tCOUNT\tFREED\tDIGEST\tFIRST REFS")
	for _, r := range rows {
		refs := r.Refs[:min(len(r.Refs), 3)]
		more := ""
		if len(r.Refs) > len(refs) {
			more = fmt.Sprintf(" (+%d)", len(r.Refs)-len(refs))
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s%s\n", r.At.UTC().Format(time.RFC3339), r.RunID, r.TenantID, r.Kind, r.Count,
			len(r.Freed), r.Digest[:12], strings.Join(refs, ","), more)
	}
	return w.Flush()
}
