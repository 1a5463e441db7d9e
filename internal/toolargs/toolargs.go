// Package toolargs checks a tool call's arguments against the JSON Schema
// of its tool's parameters, for the kinds whose calls leave agentflow
// without passing through code of its own that would (a team's activity,
// workflow or Nexus operation): arguments that do not fit never reach
// the team's code, and the model reads why, to fix them. The turn calls
// it in workflow code: it reads nothing but its input.
package toolargs

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/agentflow/agentflow/internal/agent"
)

// Check reports, as an agent.CodeInvalid error the model can act on, how
// args (the call's JSON) does not fit params (the tool's JSON Schema);
// nil when it does. A schema that does not compile is an error too: the
// catalog checks it when it is applied (Compile).
func Check(params []byte, args string) error {
	sch, err := Compile(params)
	if err != nil {
		return err
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(args))
	if err != nil {
		return agent.Errorf(agent.CodeInvalid, "arguments are not JSON: %v", err)
	}
	if err := sch.Validate(doc); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return agent.Errorf(agent.CodeInvalid, "arguments do not fit the tool's schema: %s", Problems(ve))
		}
		return agent.Errorf(agent.CodeInvalid, "arguments: %v", err)
	}
	return nil
}

// Compile compiles a tool's parameters schema, as Check does.
func Compile(params []byte) (*jsonschema.Schema, error) {
	if len(bytes.TrimSpace(params)) == 0 {
		params = []byte(`{"type":"object"}`)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(params))
	if err != nil {
		return nil, agent.Errorf(agent.CodeInvalid, "the tool's parameters: %v", err)
	}
	c := jsonschema.NewCompiler()
	const url = "mem://tool/parameters.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, agent.Errorf(agent.CodeInvalid, "the tool's parameters: %v", err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, agent.Errorf(agent.CodeInvalid, "the tool's parameters: %v", err)
	}
	return sch, nil
}

// Problems is each leaf of a validation error, where and what, in one
// line.
func Problems(ve *jsonschema.ValidationError) string {
	var out []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			out = append(out, fmt.Sprintf("/%s: %s", strings.Join(e.InstanceLocation, "/"), e.ErrorKind.LocalizedString(printer)))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return strings.Join(out, "; ")
}

var printer = message.NewPrinter(language.English)
