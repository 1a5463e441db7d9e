// Package nexusdoor serves agents as a Nexus service (agentflow.v1.Agents)
// to workflows of any namespace and SDK: the door for other teams'
// durable code. Identity comes from the endpoint, never from the input:
// the operator binds each endpoint's task queue to a tenant and roles
// (AGENTFLOW_NEXUS_BINDINGS), the worker polls that queue with a service
// that knows its binding, and an input that names a tenant or a caller
// is refused. Whoever may call the endpoint (Temporal's endpoint access
// rules, in the operator's hands) acts as the binding says.
package nexusdoor

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/nexus-rpc/sdk-go/nexus"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/tenant"
	"github.com/agentflow/agentflow/internal/words"
)

// Service and operation names: the contract callers write against
// (agentflow.AgentsService and the operation references of the root
// package, docs/guides/calling-from-workflows.md).
const (
	Service   = "agentflow.v1.Agents"
	OpRunTurn = "run_turn"
	// OpSendMessage sends a message to a conversation; its result is the
	// result of the turn that answers it.
	OpSendMessage = "send_message"
)

// EnvBindings is the operator's bindings of Nexus endpoints' task queues.
const EnvBindings = "AGENTFLOW_NEXUS_BINDINGS"

// The roles the operations need (the gateway's of the same names): user
// runs and reads turns, approver decides their approvals.
const (
	RoleUser     = "user"
	RoleApprover = "approver"
)

// IssuerEndpoint is the issuer of a caller that came through a Nexus
// endpoint: its subject is the endpoint's task queue.
const IssuerEndpoint = "agentflow:nexus-endpoint"

// Binding is what an endpoint's task queue acts as: a tenant, and the
// roles and name of its caller.
type Binding struct {
	TaskQueue string
	TenantID  string
	Roles     []string
	Name      string
}

// Caller is the binding as the turn's caller.
func (b Binding) Caller() *agent.Caller {
	return &agent.Caller{Name: cmp.Or(b.Name, "nexus:"+b.TaskQueue), Roles: b.Roles, Issuer: IssuerEndpoint, Subject: b.TaskQueue}
}

// ParseBindings reads AGENTFLOW_NEXUS_BINDINGS:
// <task_queue>=<tenant>[:<roles>[:<name>]] entries separated by commas,
// roles joined by '+' among valid. A queue is bound once.
func ParseBindings(v string, valid []string) ([]Binding, error) {
	var out []Binding
	for _, entry := range words.ListEntries(v) {
		queue, spec, ok := strings.Cut(entry, "=")
		parts := strings.SplitN(spec, ":", 3)
		if !ok || queue == "" || parts[0] == "" {
			return nil, fmt.Errorf("%s: want <task_queue>=<tenant>[:<roles>[:<name>]] entries separated by commas, got %q", EnvBindings, words.Clip(entry, 80))
		}
		b := Binding{TaskQueue: queue, TenantID: parts[0]}
		if len(parts) > 1 && parts[1] != "" {
			b.Roles = strings.Split(parts[1], "+")
			for _, r := range b.Roles {
				if !slices.Contains(valid, r) {
					return nil, fmt.Errorf("%s: queue %q: role %q is not one of %s", EnvBindings, queue, r, strings.Join(valid, ", "))
				}
			}
		}
		if len(parts) > 2 {
			b.Name = parts[2]
		}
		if err := agent.ValidateID("tenant", b.TenantID); err != nil {
			return nil, fmt.Errorf("%s: queue %q: %w", EnvBindings, queue, err)
		}
		if slices.ContainsFunc(out, func(o Binding) bool { return o.TaskQueue == queue }) {
			return nil, fmt.Errorf("%s: queue %q is bound twice", EnvBindings, queue)
		}
		out = append(out, b)
	}
	return out, nil
}

// Options are what the service needs beside its binding.
type Options struct {
	// TurnQueue is agentflow's task queue, where the turns run.
	TurnQueue string
	// Intake redacts what callers send in (prompts, messages, answers,
	// reasons) by the tenant's PII rules, as every door does.
	Intake tenant.Intake
}

// door is the service of one binding.
type door struct {
	b Binding
	o Options
}

// NewService is the Nexus service for binding b: its operations start,
// steer and read turns of b's tenant only, on agentflow's o.TurnQueue.
func NewService(b Binding, o Options) (*nexus.Service, error) {
	d := door{b: b, o: o}
	run, err := d.runTurn()
	if err != nil {
		return nil, err
	}
	send, err := d.sendMessage()
	if err != nil {
		return nil, err
	}
	svc := nexus.NewService(Service)
	if err := svc.Register(run, send, d.decide(), d.answer(), d.getResult()); err != nil {
		return nil, fmt.Errorf("nexus service %s: %w", Service, err)
	}
	return svc, nil
}

// redactor is the tenant's PII redaction of texts sent in scope.
func (d door) redactor(ctx context.Context, scope string) func(texts ...*string) error {
	return func(texts ...*string) error {
		_, err := d.o.Intake.Texts(ctx, d.b.TenantID, scope, texts...)
		return err
	}
}

// decode reads an operation's input strictly: a field the input type
// does not name is refused, and one naming a tenant or a caller says
// whose they are.
func decode[T any](name string, raw json.RawMessage) (T, error) {
	var in T
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		msg := err.Error()
		if strings.Contains(msg, `unknown field "tenant_id"`) || strings.Contains(msg, `unknown field "caller"`) {
			msg = "the tenant and the caller are the endpoint's, bound by the operator; the input cannot name them"
		}
		return in, badRequest(op(name), msg)
	}
	return in, nil
}

func op(name string) string { return name + " input" }

func badRequest(what, msg string) error {
	return nexus.HandlerErrorf(nexus.HandlerErrorTypeBadRequest, "%s: %s", what, words.Clip(msg, 300))
}

func unauthorized(name, role string) error {
	return nexus.HandlerErrorf(nexus.HandlerErrorTypeUnauthorized, "the endpoint's binding gives no %s role: it may not call %s", role, name)
}

func (b Binding) may(role string) bool { return slices.Contains(b.Roles, role) }
