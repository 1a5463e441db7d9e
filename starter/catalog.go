package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"gopkg.in/yaml.v3"

	"github.com/agentflow/agentflow/internal/catalog"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// catalogCmd validates and applies catalog files through the gateway
// (CatalogService.UpsertCatalog), for the tenant of the token.
func catalogCmd(ctx context.Context, args []string, out io.Writer) error {
	const usage = "usage: starter catalog apply -f DIR|FILE [-f ...] [--dry-run] [--allow-unreachable] [--gate DATASET_ID [--gate-min-pass R] [--gate-report FILE]] [--addr HOST:PORT] [--token TOKEN]"
	if len(args) == 0 || args[0] != "apply" {
		return errors.New(usage)
	}
	fs := newFlagSet("catalog apply", usage)
	api := addAPIFlags(fs)
	var paths multiFlag
	fs.Var(&paths, "f", "catalog file or directory: every *.yaml and *.yml directly in it (repeatable)")
	dryRun := fs.Bool("dry-run", false, "validate and print the changes without applying them")
	allowUnreachable := fs.Bool("allow-unreachable", false, "apply tool entries whose server or document cannot be reached now, without what it would give")
	var g gate
	fs.StringVar(&g.dataset, "gate", "", "a stored dataset (eval record): stage the new agent versions, replay the dataset on the active and the staged version of each, and apply only if no case that passes on the active one fails on the staged one")
	fs.Float64Var(&g.minPass, "gate-min-pass", 0, "with --gate: the share of cases (0 to 1) that must pass on each staged version")
	fs.StringVar(&g.report, "gate-report", "", "with --gate: write each evaluation's report to this file (.md or .html; the agent's id is added before the extension)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if len(paths) == 0 {
		return fmt.Errorf("catalog apply: name the catalog with -f DIR|FILE")
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("catalog apply: unexpected argument %q: name files and directories with -f", fs.Arg(0))
	}
	files, err := readCatalog(paths...)
	if err != nil {
		return fmt.Errorf("catalog apply: %w", err)
	}
	if g.dataset != "" {
		if *dryRun {
			return fmt.Errorf("catalog apply: --gate and --dry-run: choose one")
		}
		if err := g.check(ctx, api, files, *allowUnreachable, out); err != nil {
			return err
		}
	}
	resp, err := applyCatalog(ctx, api, &pb.UpsertCatalogRequest{Files: files, DryRun: *dryRun, AllowUnreachable: *allowUnreachable})
	if err != nil {
		return err
	}
	printCatalogReport(out, resp, *dryRun)
	return nil
}

// applyCatalog sends catalog files to the gateway, which validates and
// applies them all or nothing. Problems with the files come back one per
// line, file:line first.
func applyCatalog(ctx context.Context, api apiFlags, req *pb.UpsertCatalogRequest) (*pb.UpsertCatalogResponse, error) {
	c, ctx, closeConn, err := api.dialCatalog(ctx)
	if err != nil {
		return nil, err
	}
	defer closeConn()
	resp, err := c.UpsertCatalog(ctx, req)
	if st, ok := status.FromError(err); ok && st.Code() == codes.InvalidArgument {
		return nil, &callError{msg: "catalog apply: nothing was applied; the catalog has problems:\n" + st.Message(), err: err}
	}
	if err != nil {
		return nil, api.failed("catalog apply", err)
	}
	return resp, nil
}

// printCatalogReport prints one line per change: action, kind,
// tenant/name, the version it made active and, for a tool an entry stands
// for (an MCP server's), the entry.
func printCatalogReport(out io.Writer, resp *pb.UpsertCatalogResponse, dryRun bool) {
	tenant := ""
	for _, c := range resp.GetChanges() {
		if c.GetKind() == "tenant" { // first in each tenant's changes
			tenant = c.GetName()
		}
		fmt.Fprintf(out, "  %-9s %-5s %s/%s", c.GetAction(), c.GetKind(), tenant, c.GetName())
		if c.GetVersion() > 0 {
			fmt.Fprintf(out, " v%d", c.GetVersion())
		}
		if c.GetSource() != "" {
			fmt.Fprintf(out, " (from %s)", c.GetSource())
		}
		if c.GetNote() != "" {
			fmt.Fprintf(out, ": %s", c.GetNote())
		}
		fmt.Fprintln(out)
	}
	if dryRun {
		fmt.Fprint(out, "dry run: nothing was applied")
		if v := resp.GetCatalogVersion(); v > 0 {
			fmt.Fprintf(out, " (catalog version %d)", v)
		}
		fmt.Fprintln(out)
		return
	}
	fmt.Fprintf(out, "applied: catalog version %d\n", resp.GetCatalogVersion())
}

// readCatalog reads catalog files by name. A path may be a directory:
// then every *.yaml and *.yml file directly in it is read.
func readCatalog(paths ...string) (map[string]string, error) {
	files := map[string]string{}
	for _, path := range paths {
		names, err := catalog.Files(path)
		if err != nil {
			return nil, err
		}
		for _, name := range names {
			data, err := os.ReadFile(name)
			if err != nil {
				return nil, err
			}
			files[name] = string(data)
		}
	}
	return files, nil
}

// splitByTenant splits catalog files by the tenant each document names, for
// a caller that applies them with one token per tenant; with model set,
// every agent's model is replaced by it. A document that names no tenant
// goes with another tenant's documents (the gateway says what is wrong
// with it); only when no document names a tenant are the files under "".
func splitByTenant(files map[string]string, model string) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	for name, data := range files {
		parts, err := splitFile(data, model)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		for tenant, doc := range parts {
			if out[tenant] == nil {
				out[tenant] = map[string]string{}
			}
			out[tenant][name] = doc
		}
	}
	if rest, ok := out[""]; ok && len(out) > 1 {
		delete(out, "")
		maps.Copy(out[slices.Sorted(maps.Keys(out))[0]], rest)
	}
	return out, nil
}

// splitFile returns one file's documents by tenant. A file of one tenant
// that needs no new model is kept as it is, so that problems keep their
// lines, and so is a file that does not parse (the gateway reports the
// syntax error with its line); others are re-encoded. Documents without a
// tenant go with the file's first tenant.
func splitFile(data, model string) (map[string]string, error) {
	docs, err := yamlDocuments(data)
	if err != nil {
		return map[string]string{"": data}, nil
	}
	var tenants []string
	byTenant := map[string][]*yaml.Node{}
	changed := false
	for _, d := range docs {
		t := stringField(d, "tenant")
		if _, seen := byTenant[t]; !seen {
			tenants = append(tenants, t)
		}
		byTenant[t] = append(byTenant[t], d)
		if model != "" && setModels(d, model) {
			changed = true
		}
	}
	if len(tenants) > 1 && byTenant[""] != nil {
		tenants = slices.DeleteFunc(tenants, func(t string) bool { return t == "" })
		byTenant[tenants[0]] = append(byTenant[tenants[0]], byTenant[""]...)
	}
	if len(tenants) <= 1 && !changed {
		return map[string]string{firstOr(tenants, ""): data}, nil
	}
	out := map[string]string{}
	for _, t := range tenants {
		var b bytes.Buffer
		enc := yaml.NewEncoder(&b)
		enc.SetIndent(2)
		for _, d := range byTenant[t] {
			if err := enc.Encode(d); err != nil {
				return nil, err
			}
		}
		if err := enc.Close(); err != nil {
			return nil, err
		}
		out[t] = b.String()
	}
	return out, nil
}

// yamlDocuments parses a file's documents, leaving out empty ones.
func yamlDocuments(data string) ([]*yaml.Node, error) {
	dec := yaml.NewDecoder(strings.NewReader(data))
	var docs []*yaml.Node
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if root := documentRoot(&doc); root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
			continue
		}
		docs = append(docs, &doc)
	}
}

func documentRoot(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		return n.Content[0]
	}
	return n
}

// field returns the value of a mapping's key, or nil.
func field(n *yaml.Node, key string) *yaml.Node {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// stringField returns a document's top-level string value of key, or "".
func stringField(doc *yaml.Node, key string) string {
	if v := field(documentRoot(doc), key); v != nil && v.Kind == yaml.ScalarNode {
		return v.Value
	}
	return ""
}

// setModels sets the model of every agent of a document, and reports
// whether there was one.
func setModels(doc *yaml.Node, model string) bool {
	agents := field(documentRoot(doc), "agents")
	if agents == nil || agents.Kind != yaml.SequenceNode {
		return false
	}
	changed := false
	for _, a := range agents.Content {
		if a.Kind != yaml.MappingNode {
			continue
		}
		if v := field(a, "model"); v != nil {
			v.Kind, v.Tag, v.Value, v.Style = yaml.ScalarNode, "!!str", model, 0
		} else {
			a.Content = append(a.Content,
				&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "model"},
				&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: model})
		}
		changed = true
	}
	return changed
}

func firstOr(s []string, def string) string {
	if len(s) == 0 {
		return def
	}
	return s[0]
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }
