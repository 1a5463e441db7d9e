package evals

import (
	"bytes"
	"encoding/json"
	"fmt"

	"gopkg.in/yaml.v3"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/structured"
)

// MaxDatasetBytes bounds a dataset file.
const MaxDatasetBytes = 2 << 20

// datasetDoc is a dataset file: its cases are decoded one by one, so that
// an error names the case and its line.
type datasetDoc struct {
	Name        string      `yaml:"name"`
	Description string      `yaml:"description"`
	Agent       string      `yaml:"agent"`
	Cases       []yaml.Node `yaml:"cases"`
}

// Parse reads a dataset (YAML, or JSON, which is YAML) and checks it: a
// malformed case is refused with its index, id and line, and nothing of
// the dataset is used.
func Parse(data []byte) (agent.EvalDataset, error) {
	if len(data) > MaxDatasetBytes {
		return agent.EvalDataset{}, agent.Errorf(agent.CodeInvalid, "dataset: %d bytes; the limit is %d", len(data), MaxDatasetBytes)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var doc datasetDoc
	if err := dec.Decode(&doc); err != nil {
		return agent.EvalDataset{}, agent.Errorf(agent.CodeInvalid, "dataset: %v", err)
	}
	d := agent.EvalDataset{Name: doc.Name, Description: doc.Description, Agent: doc.Agent}
	for i, node := range doc.Cases {
		c, err := decodeCase(&node)
		if err != nil {
			return agent.EvalDataset{}, agent.Errorf(agent.CodeInvalid, "dataset %s: cases[%d] (line %d): %v", doc.Name, i, node.Line, err)
		}
		d.Cases = append(d.Cases, c)
	}
	if err := d.Validate(); err != nil {
		return agent.EvalDataset{}, err
	}
	for i, c := range d.Cases {
		if a := c.Expect.Answer; a != nil && len(a.Schema) > 0 {
			if _, err := structured.Compile(a.Schema); err != nil {
				return agent.EvalDataset{}, agent.Errorf(agent.CodeInvalid, "dataset %s: cases[%d] (id %s): expect.answer.schema: %v", d.Name, i, c.ID, err)
			}
		}
	}
	return d, nil
}

// decodeCase reads one case strictly: YAML to JSON, then JSON into the
// case with unknown fields refused.
func decodeCase(node *yaml.Node) (agent.EvalCase, error) {
	var v any
	if err := node.Decode(&v); err != nil {
		return agent.EvalCase{}, err
	}
	v, err := stringKeys(v)
	if err != nil {
		return agent.EvalCase{}, err
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return agent.EvalCase{}, fmt.Errorf("not a JSON-like value: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var c agent.EvalCase
	if err := dec.Decode(&c); err != nil {
		return agent.EvalCase{}, fmt.Errorf("%v (a case has id, prompt, history and expect)", err)
	}
	return c, nil
}

// stringKeys returns v with every mapping's keys as strings, or says
// which key is not one (a YAML flow mapping whose text has a comma, such
// as {rubric: a, b}, makes one).
func stringKeys(v any) (any, error) {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			e, err := stringKeys(e)
			if err != nil {
				return nil, err
			}
			t[k] = e
		}
		return t, nil
	case map[any]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			s, ok := k.(string)
			if !ok {
				return nil, fmt.Errorf("the key %v is not a string (quote a value that has a comma or a colon)", k)
			}
			e, err := stringKeys(e)
			if err != nil {
				return nil, err
			}
			out[s] = e
		}
		return out, nil
	case []any:
		for i, e := range t {
			e, err := stringKeys(e)
			if err != nil {
				return nil, err
			}
			t[i] = e
		}
		return t, nil
	}
	return v, nil
}
