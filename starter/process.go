package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/agentflow/agentflow/internal/process"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

const processUsage = `usage: starter process list
       starter process show --tag TAG [--version N] [--json]
       starter process history --tag TAG
(each with [--addr HOST:PORT] [--token TOKEN]; the token's tenant, role admin)`

// processCmd reads the tenant's process definitions through the gateway
// (CatalogService GetProcess, ListProcesses, ListProcessVersions).
func processCmd(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New(processUsage)
	}
	sub := args[0]
	fs := newFlagSet("process "+sub, processUsage)
	api := addAPIFlags(fs)
	var tag *string
	if sub == "show" || sub == "history" {
		tag = fs.String("tag", "", "the process's tag (its workflow_tag)")
	}
	version := 0
	asJSON := false
	if sub == "show" {
		fs.IntVar(&version, "version", 0, "the version to show (default: the latest)")
		fs.BoolVar(&asJSON, "json", false, "print only the definition, as JSON (to copy into the catalog)")
	}
	switch sub {
	case "list", "show", "history":
	default:
		return fmt.Errorf("process: unknown command %q\n%s", sub, processUsage)
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("process %s: unexpected argument %q", sub, fs.Arg(0))
	}
	if tag != nil && *tag == "" {
		return fmt.Errorf("process %s: name the process with --tag (starter process list shows them)", sub)
	}
	c, ctx, closeConn, err := api.dialCatalog(ctx)
	if err != nil {
		return err
	}
	defer closeConn()
	switch sub {
	case "list":
		resp, err := c.ListProcesses(ctx, &pb.ListProcessesRequest{})
		if err != nil {
			return api.failed("process list", err)
		}
		printProcesses(out, resp.GetProcesses())
	case "show":
		p, err := c.GetProcess(ctx, &pb.GetProcessRequest{Tag: *tag, Version: int32(version)})
		if err != nil {
			return api.failed("process show", err)
		}
		return printProcess(out, p, asJSON)
	case "history":
		resp, err := c.ListProcessVersions(ctx, &pb.ListProcessVersionsRequest{Tag: *tag})
		if err != nil {
			return api.failed("process history", err)
		}
		printHistory(out, *tag, resp.GetVersions())
	}
	return nil
}

func printProcesses(out io.Writer, list []*pb.Process) {
	if len(list) == 0 {
		fmt.Fprintln(out, "no processes: add them to the catalog under processes:")
		return
	}
	for _, p := range list {
		fmt.Fprintf(out, "%-20s v%-3d %-7s %s\n", p.GetTag(), p.GetVersion(), p.GetSource(), p.GetDescription())
	}
}

// printProcess prints a version's header and its definition, indented;
// with asJSON the definition only.
func printProcess(out io.Writer, p *pb.Process, asJSON bool) error {
	var def bytes.Buffer
	if err := json.Indent(&def, []byte(p.GetDefinitionJson()), "", "  "); err != nil {
		return fmt.Errorf("process show: the definition is not JSON: %w", err)
	}
	def.WriteByte('\n')
	if asJSON {
		_, err := out.Write(def.Bytes())
		return err
	}
	fmt.Fprintf(out, "process %s v%d of %d, from the %s", p.GetTag(), p.GetVersion(), p.GetLatestVersion(), p.GetSource())
	if p.GetPatchId() != "" {
		fmt.Fprintf(out, " (%s)", p.GetPatchId())
	}
	fmt.Fprintf(out, ", %s\n", stamp(p.GetCreatedAt().AsTime()))
	if d := p.GetDescription(); d != "" {
		fmt.Fprintln(out, d)
	}
	if s := p.GetSchemaJson(); s != "" {
		fmt.Fprintf(out, "schema: %s\n", s)
	}
	_, err := out.Write(def.Bytes())
	return err
}

// printHistory prints a process's versions, oldest first; a patched
// version with its audit record and operations.
func printHistory(out io.Writer, tag string, versions []*pb.ProcessVersionInfo) {
	fmt.Fprintf(out, "process %s: %d versions\n", tag, len(versions))
	for _, v := range versions {
		fmt.Fprintf(out, "v%-3d %s  %s", v.GetVersion(), stamp(v.GetCreatedAt().AsTime()), v.GetSource())
		p := v.GetPatch()
		if p == nil {
			fmt.Fprintln(out)
			continue
		}
		approval := "no approval needed"
		if p.GetApprover() != "" {
			approval = "approved by " + p.GetApprover()
		}
		fmt.Fprintf(out, " %s of v%d, %s\n", p.GetPatchId(), p.GetFromVersion(), approval)
		fmt.Fprintf(out, "     turn %s (job %s), call %s\n", p.GetWorkflowId(), p.GetJobId(), p.GetCallId())
		fmt.Fprintf(out, "     %s\n", p.GetDescription())
		ops, err := process.DecodeOperations([]byte(p.GetOperationsJson()))
		if err != nil {
			fmt.Fprintf(out, "     %s\n", p.GetOperationsJson())
			continue
		}
		for _, op := range ops {
			fmt.Fprintf(out, "     %s", op)
			if len(op.Value) > 0 {
				fmt.Fprintf(out, " %s", op.Value)
			}
			fmt.Fprintln(out)
		}
	}
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
