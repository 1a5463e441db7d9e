package pipelinetool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"path"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/approval"
	"github.com/agentflow/agentflow/internal/pipeline"
	"github.com/agentflow/agentflow/internal/tools/kind"
)

// compositeConfig is composite_pipeline's config: a pipeline and the
// execute_pipeline settings it runs with.
type compositeConfig struct {
	// Pipeline is execute_pipeline's arguments; the values of its shape's
	// parameters are the examples, replaced by each call's arguments.
	Pipeline json.RawMessage `json:"pipeline"`
	// Shape, when set, must be the pipeline's shape hash (promotion sets it).
	Shape       string       `json:"shape,omitempty"`
	CacheTTLSec *int         `json:"cache_ttl_sec,omitempty"`
	MaxRows     int          `json:"max_rows,omitempty"`
	Credentials []credential `json:"credentials,omitempty"`
}

const compositeConfigSchema = `{"type":"object","additionalProperties":false,"required":["pipeline"],"properties":{` +
	`"pipeline":{"type":"object","description":"execute_pipeline's arguments; its http_request params, table_filter values, top_k counts and input_ref become the tool's arguments"},` +
	`"shape":{"type":"string","description":"the pipeline's shape hash (set by promotion)"},` +

	`"cache_ttl_sec":{"type":"integer","minimum":0,"maximum":86400},` +
	`"max_rows":{"type":"integer","minimum":1,"maximum":1000000},` +
	`"credentials":{"type":"array","items":{"type":"object","additionalProperties":false,"required":["host","secret"],` +
	`"properties":{"host":{"type":"string","minLength":1},"header":{"type":"string"},"prefix":{"type":"string"},"query":{"type":"string"},` +
	`"secret":{"type":"string","pattern":"^[a-z]+:"}}}}}}`

// CompositePipeline returns the composite_pipeline kind: a pipeline kept as
// a tool of its own, called with just the values that differ between runs
// (seed 004 Phase 4). execute_pipeline promotes a pipeline a tenant runs
// often into one (Deps.Composites); a catalog may declare one too. Agents
// that list `composites` are granted every composite of their tenant,
// those promoted later included.
func CompositePipeline() kind.Kind {
	return kind.Kind{
		Name:        "composite_pipeline",
		Description: "A saved pipeline, run with just its arguments.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{}}`),
		Config:      json.RawMessage(compositeConfigSchema),
		Build:       buildComposite,
		// A composite's calls are pipeline runs: they need approval when
		// the pipeline tool's would (the POST rule at least), evaluated on
		// the pipeline each call binds.
		Approval:      pipelineApproval,
		ApprovalFloor: pipelineApproval,
		ApprovalArgs:  compositeApprovalArgs,
		Resolve: func(_ context.Context, spec agent.Tool, _ kind.ResolveEnv) ([]agent.Tool, error) {
			// A declared composite gets the arguments and description its
			// pipeline gives, as a promoted one does.
			c, err := decodeComposite(spec.Config)
			if err != nil {
				return nil, err
			}
			shape := pipeline.ShapeOf(c.pipeline)
			spec.Parameters = compositeParameters(shape)
			if spec.Description == "" || spec.Description == "A saved pipeline, run with just its arguments." {
				spec.Description = describePipeline(c.pipeline, shape)
			}
			return []agent.Tool{spec}, nil
		},
	}
}

type compositeTool struct {
	pipe  *pipelineTool
	p     pipeline.Pipeline
	shape pipeline.Shape
}

// decodedComposite is a checked config.
type decodedComposite struct {
	cfg      compositeConfig
	pipeline pipeline.Pipeline
}

func decodeComposite(raw json.RawMessage) (decodedComposite, error) {
	var c decodedComposite
	if err := kind.DecodeConfig(raw, &c.cfg, "composite_pipeline"); err != nil {
		return c, err
	}
	if len(c.cfg.Pipeline) == 0 {
		return c, agent.Errorf(agent.CodeInvalid, "composite_pipeline config: pipeline is required")
	}
	p, err := pipeline.Decode(c.cfg.Pipeline)
	if err != nil {
		return c, agent.Errorf(agent.CodeInvalid, "composite_pipeline config: pipeline: %v", err)
	}
	c.pipeline = p
	if c.cfg.Shape != "" && c.cfg.Shape != pipeline.ShapeOf(p).Hash {
		return c, agent.Errorf(agent.CodeInvalid, "composite_pipeline config: shape %s is not its pipeline's", c.cfg.Shape)
	}
	return c, nil
}

func buildComposite(spec agent.Tool, deps kind.Deps) (kind.Tool, error) {
	c, err := decodeComposite(spec.Config)
	if err != nil {
		return nil, err
	}
	inner, err := json.Marshal(pipelineConfig{CacheTTLSec: c.cfg.CacheTTLSec, MaxRows: c.cfg.MaxRows, Credentials: c.cfg.Credentials})
	if err != nil {
		return nil, fmt.Errorf("composite_pipeline config: %w", err)
	}
	pt, err := buildPipeline(agent.Tool{Name: spec.Name, Kind: "execute_pipeline", Config: inner}, deps)
	if err != nil {
		return nil, err
	}
	return &compositeTool{pipe: pt.(*pipelineTool), p: c.pipeline, shape: pipeline.ShapeOf(c.pipeline)}, nil
}

func (t *compositeTool) Run(ctx context.Context, call kind.Call) (kind.Output, error) {
	values, err := compositeValues(call.Args)
	if err != nil {
		return kind.Output{}, agent.Errorf(agent.CodeInvalid, "arguments must be a JSON object of %s", paramList(t.shape))
	}
	p, err := t.shape.Bind(t.p, values)
	if err != nil {
		return kind.Output{}, err
	}
	return t.pipe.run(ctx, call, p)
}

// compositeValues reads a composite's arguments, numbers kept as written.
func compositeValues(args json.RawMessage) (map[string]any, error) {
	var values map[string]any
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	if err := dec.Decode(&values); err != nil {
		return nil, err
	}
	if values == nil {
		return nil, agent.Errorf(agent.CodeInvalid, "arguments must be a JSON object")
	}
	return values, nil
}

// compositeSpec is the tool a run of p would be promoted into: named for
// what it does, with the shape's parameters as its arguments, the
// execute_pipeline settings it ran with, and the approval policy of the
// tool that ran it (policy), which its calls are held to as the
// pipelines they run (Registry.Approval).
func compositeSpec(p pipeline.Pipeline, shape pipeline.Shape, cfg pipelineConfig, policy string) (agent.Tool, error) {
	p.SessionID = "composite"
	raw, err := json.Marshal(p)
	if err != nil {
		return agent.Tool{}, err
	}
	config, err := json.Marshal(compositeConfig{Pipeline: raw, Shape: shape.Hash, CacheTTLSec: cfg.CacheTTLSec, MaxRows: cfg.MaxRows, Credentials: cfg.Credentials})
	if err != nil {
		return agent.Tool{}, err
	}
	return agent.Tool{
		Name:        compositeName(p),
		Kind:        "composite_pipeline",
		Description: describePipeline(p, shape),
		Parameters:  compositeParameters(shape),
		Approval:    approval.Strictest(policy, pipelineApproval),
		Config:      config,
	}, nil
}

// compositeParameters is the JSON Schema of a composite's arguments.
func compositeParameters(shape pipeline.Shape) json.RawMessage {
	props := map[string]any{}
	required := []string{}
	for _, prm := range shape.Params {
		desc := prm.Description
		if prm.Example != nil {
			ex, _ := json.Marshal(prm.Example)
			desc += "; e.g. " + string(ex)
		}
		props[prm.Name] = map[string]any{"type": prm.Type, "description": desc}
		required = append(required, prm.Name)
	}
	b, _ := json.Marshal(map[string]any{"type": "object", "additionalProperties": false, "required": required, "properties": props})
	return b
}

func paramList(shape pipeline.Shape) string {
	if len(shape.Params) == 0 {
		return "no arguments"
	}
	return strings.Join(shape.ParamNames(), ", ")
}

// stepWords name the steps in a composite's name.
var stepWords = map[pipeline.Op]string{
	pipeline.OpTableSort: "sorted", pipeline.OpTableFilter: "filtered", pipeline.OpTableSelect: "selected",
	pipeline.OpTopK: "top", pipeline.OpGroupBy: "grouped", pipeline.OpJoin: "joined", pipeline.OpJQTransform: "reshaped",
	pipeline.OpRegexExtract: "extracted", pipeline.OpParseDate: "dated",
}

// compositeName names a composite for what it does: where its data comes
// from (the last segment of the URL's path) and its steps, e.g.
// search_filtered_sorted_top.
func compositeName(p pipeline.Pipeline) string {
	parts := []string{"data"}
	for _, s := range p.Steps {
		if s.Op == pipeline.OpHTTPRequest {
			if u, err := url.Parse(s.URL); err == nil {
				if seg := paramWord(strings.TrimSuffix(path.Base(u.Path), path.Ext(u.Path))); seg != "" && seg != "." {
					parts[0] = seg
				} else if host := paramWord(u.Hostname()); host != "" {
					parts[0] = host
				}
			}
			continue
		}
		if w := stepWords[s.Op]; w != "" && parts[len(parts)-1] != w {
			parts = append(parts, w)
		}
	}
	name := strings.Join(parts, "_")
	return strings.TrimRight(name[:min(len(name), 56)], "_")
}

func paramWord(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "_"):
			b.WriteByte('_')
		}
	}
	return strings.Trim(b.String(), "_")
}

// describePipeline says what a composite does, for the model and for
// search_tools.
func describePipeline(p pipeline.Pipeline, shape pipeline.Shape) string {
	arg := map[string]string{} // "step/field/key" → argument name
	for _, prm := range shape.Params {
		arg[fmt.Sprintf("%d/%s/%s", prm.Step, prm.Field, prm.Key)] = prm.Name
	}
	var steps []string
	if p.InputRef != "" {
		steps = append(steps, "start from the data of input_ref")
	}
	for i, s := range p.Steps {
		switch s.Op {
		case pipeline.OpHTTPRequest:
			var ps []string
			for _, prm := range shape.Params {
				if prm.Step == i && prm.Field == "params" {
					ps = append(ps, prm.Name)
				}
			}
			d := fmt.Sprintf("%s %s", s.Method, s.URL)
			if len(ps) > 0 {
				d += " with " + strings.Join(ps, ", ")
			}
			if s.BodyRef != "" {
				d += ", sending the file of " + arg[fmt.Sprintf("%d/body_ref/", i)]
			}
			if s.ResponseAs == pipeline.ResponseFile {
				d += ", keeping the response as a file"
			}
			steps = append(steps, d)
		case pipeline.OpTableFilter:
			steps = append(steps, fmt.Sprintf("keep rows where %s %s %s", s.Condition.Field, s.Condition.Op, arg[fmt.Sprintf("%d/value/", i)]))
		case pipeline.OpTableSort:
			steps = append(steps, fmt.Sprintf("sort by %s %s", s.Field, s.Order))
		case pipeline.OpTopK:
			steps = append(steps, "keep the first "+arg[fmt.Sprintf("%d/k/", i)])
		case pipeline.OpTableSelect:
			steps = append(steps, "keep the fields "+strings.Join(s.Fields, ", "))
		case pipeline.OpGroupBy:
			steps = append(steps, fmt.Sprintf("group by %s (%s of %s)", strings.Join(s.By, ", "), s.Agg, s.Field))
		case pipeline.OpJoin:
			steps = append(steps, "join on "+s.On)
		case pipeline.OpJQTransform:
			steps = append(steps, "reshape with jq")
		case pipeline.OpRegexExtract:
			steps = append(steps, "extract from "+s.Field)
		case pipeline.OpParseDate:
			steps = append(steps, "parse "+s.Field+" as dates")
		}
	}
	return "A saved pipeline: " + strings.Join(steps, "; then ") + ". Arguments: " + paramList(shape) + "."
}

// compositeApprovalArgs presents a composite's call to approval policies as
// the execute_pipeline call it runs: the call's own arguments plus the
// bound pipeline (session_id, pipeline, input_ref), so that the pipeline
// tool's policy (args.pipeline…) applies to it unchanged.
func compositeApprovalArgs(spec agent.Tool, args json.RawMessage) (json.RawMessage, error) {
	c, err := decodeComposite(spec.Config)
	if err != nil {
		return nil, err
	}
	values, err := compositeValues(args)
	if err != nil {
		return nil, err
	}
	bound, err := pipeline.ShapeOf(c.pipeline).Bind(c.pipeline, values)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(bound)
	if err != nil {
		return nil, err
	}
	var view map[string]json.RawMessage
	if err := json.Unmarshal(raw, &view); err != nil {
		return nil, err
	}
	var own map[string]json.RawMessage
	if err := json.Unmarshal(args, &own); err != nil {
		return nil, err
	}
	merged := maps.Clone(own)
	if merged == nil {
		merged = map[string]json.RawMessage{}
	}
	maps.Copy(merged, view) // the pipeline's fields win: they are what runs
	return json.Marshal(merged)
}
