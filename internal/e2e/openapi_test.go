package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/crm"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// openapiScript drives the sales agent: it looks customers up, places
// orders, and, asked about orders, first guesses an operation the API
// does not have, then leaves out a required parameter, and recovers from
// each by reading the error.
const openapiScript = `
pacing: {chunk_words: 4, delay_ms: 2}
rules:
  - name: lookup
    when: {user: '(?i)^who is customer (?P<id>[0-9]+)\?$'}
    reply:
      tool_calls: [{name: crm, arguments: '{"operation_id": "getCustomer", "params": {"customerId": ${id}}}'}]
  - name: order
    when: {user: '(?i)^order (?P<qty>[0-9]+) of (?P<sku>SKU-[0-9]+) for customer (?P<id>[0-9]+)$'}
    reply:
      tool_calls: [{name: crm, arguments: '{"operation_id": "createOrder", "body": {"customerId": ${id}, "items": [{"sku": "${sku}", "qty": ${qty}}]}}'}]
  - name: orders-guess
    when: {user: '(?i)^how many orders has customer (?P<id>[0-9]+)\?$'}
    reply:
      tool_calls: [{name: crm, arguments: '{"operation_id": "customerOrders", "params": {"customerId": ${id}}}'}]
  - name: orders-pick-operation
    when:
      user: '(?i)customer (?P<id>[0-9]+)'
      tool: '^error: crm: unknown operation_id "customerOrders"; the operations are .*\b(?P<op>listOrders)\b'
    reply:
      tool_calls: [{name: crm, arguments: '{"operation_id": "${op}", "params": {}}'}]
  - name: orders-add-parameter
    when:
      user: '(?i)customer (?P<id>[0-9]+)'
      tool: '^error: crm: listOrders: parameter "(?P<param>\w+)" \(path\) is required'
    reply:
      tool_calls: [{name: crm, arguments: '{"operation_id": "listOrders", "params": {"${param}": ${id}}}'}]
  - name: customer-answer
    when: {tool: '(?s)^getCustomer answered 200 OK.*"name":"(?P<name>[^"]+)".*"tier":"(?P<tier>[^"]+)"'}
    reply: {text: '${name} is on the ${tier} tier.'}
  - name: order-answer
    when: {tool: '(?s)^createOrder answered 201 Created.*"id":"(?P<order>[^"]+)"'}
    reply: {text: 'Placed order ${order}.'}
  - name: orders-answer
    when:
      user: '(?i)customer (?P<id>[0-9]+)'
      tool: '^listOrders answered 200 OK: (?P<n>[0-9]+) items'
    reply: {text: 'Customer ${id} has ${n} orders.'}
  - name: tool-error
    when: {tool: '(?s)^error: (.+)$'}
    reply: {text: 'The CRM said: $1'}
  - name: fallback
    reply: {text: "I don't know."}
`

// openapiCatalog gives the sales agent the CRM's operations through one
// openapi_action entry: the document from spec_url, the API in the
// tenant's egress allowlist, a bearer token by reference, and the kind's
// approval policy. URL and HOST stand for the CRM's URL and host:port.
const openapiCatalog = `
tenant: sales
default_agent: sales
egress: ["HOST"]
tools:
  - name: crm
    kind: openapi_action
    config:
      spec_url: URL/openapi.yaml
      auth: [{type: bearer, secret: "env:TEST_CRM_TOKEN"}]
agents:
  - id: sales
    model: openai:gpt-4o-mini
    tools: [crm]
    limits: {max_iterations: 6, turn_timeout_sec: 120, approval_timeout_sec: 300}
`

// crmAPI is internal/crm behind a bearer token, counting the fetches of
// its document and the calls of its API.
type crmAPI struct {
	*httptest.Server
	api         *crm.API
	docs, calls atomic.Int32
	keys        atomic.Value // the last Idempotency-Key sent, a string
}

func startCRM(t *testing.T, token string) *crmAPI {
	t.Helper()
	s := &crmAPI{api: crm.New()}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/openapi.") {
			s.docs.Add(1)
			s.api.ServeHTTP(w, r)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"a valid bearer token is required"}`))
			return
		}
		s.calls.Add(1)
		if k := r.Header.Get("Idempotency-Key"); k != "" {
			s.keys.Store(k)
		}
		s.api.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// TestOpenAPITurns runs openapi_action on the real stack against a local
// CRM: a read is answered without a person; a call that changes something
// waits for approval and runs once approved through the approve update;
// an unknown operation and a missing required parameter reach the model
// as errors it recovers from; the document is fetched once per catalog
// version; the token is used on every call and kept out of histories,
// tables and logs.
func TestOpenAPITurns(t *testing.T) {
	token := "crm-token-" + testserver.RandomID() + testserver.RandomID()
	t.Setenv("TEST_CRM_TOKEN", token)
	api := startCRM(t, token)
	catalog := strings.NewReplacer("URL", api.URL, "HOST", strings.TrimPrefix(api.URL, "http://")).Replace(openapiCatalog)
	logger, log := keptLog(t, zap.WarnLevel)
	srv := testserver.Start(t, testserver.Options{Script: openapiScript, Catalogs: []string{catalog}, Logger: logger})
	e := &dataEnv{env: &env{Server: srv, t: t}, log: log}
	require.EqualValues(t, 1, api.docs.Load(), "applying the catalog fetched the document")

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var job string // the last turn's
	start := func(name, prompt string) client.WorkflowRun {
		t.Helper()
		job = name + "-" + testserver.RandomID()
		run, err := turnclient.Start(ctx, e.Client(), e.TaskQueue, agent.TurnRequest{Version: agent.ProtocolVersion,
			TenantID: "sales", JobID: job, Prompt: prompt})
		require.NoError(t, err)
		e.ids = append(e.ids, run.GetID())
		return run
	}
	finish := func(run client.WorkflowRun) agent.TurnResult {
		t.Helper()
		res, err := turnclient.Result(ctx, run)
		require.NoError(t, err)
		require.Equal(t, agent.StatusCompleted, res.Status)
		return res
	}

	// A read runs without a person, and the model reads the checked answer.
	res := finish(start("lookup", "who is customer 7?"))
	want, _ := crm.CustomerByID(7)
	require.Equal(t, want.Name+" is on the "+want.Tier+" tier.", res.Output)
	require.Len(t, res.Metadata.ToolCalls, 1)
	require.Equal(t, "crm", res.Metadata.ToolCalls[0].Tool)
	require.Equal(t, agent.ToolOK, res.Metadata.ToolCalls[0].Status)
	require.EqualValues(t, 1, api.calls.Load())

	// An order waits for approval; nothing is sent before it.
	orders := len(api.api.Orders())
	run := start("order", "order 2 of SKU-5 for customer 3")
	p := e.awaitPending(run.GetID())
	require.Equal(t, "crm", p.Tool)
	require.JSONEq(t, `{"operation_id": "createOrder", "body": {"customerId": 3, "items": [{"sku": "SKU-5", "qty": 2}]}}`, string(p.Args))
	require.EqualValues(t, 1, api.calls.Load(), "nothing is sent while the call waits")
	h, err := e.Client().UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: run.GetID(), UpdateName: contract.UpdateApprove, WaitForStage: client.WorkflowUpdateStageCompleted,
		Args: []any{agent.NewApprovalDecision(p.CallID, true, "", "ana")},
	})
	require.NoError(t, err)
	var ack contract.ApprovalAck
	require.NoError(t, h.Get(ctx, &ack))
	require.Equal(t, agent.ApprovalApproved, ack.Outcome)
	res = finish(run)
	placed := api.api.Orders()
	require.Len(t, placed, orders+1, "one order placed")
	last := placed[len(placed)-1]
	require.Equal(t, crm.Order{ID: last.ID, CustomerID: 3, Status: "open", Items: []crm.Item{{SKU: "SKU-5", Qty: 2}}}, last)
	require.Equal(t, "Placed order "+last.ID+".", res.Output)
	require.Equal(t, agent.ToolOK, res.Metadata.ToolCalls[0].Status)
	require.NotEmpty(t, api.keys.Load(), "the order was sent with an idempotency key")
	recs, err := e.Store().Approvals(ctx, "sales", job)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, agent.ApprovalApproved, recs[0].Outcome)
	require.Equal(t, "ana", recs[0].Approver)
	e.replay(run.GetID(), "turn_openapi_approval")

	// An operation the API lacks, then a missing parameter: the model
	// reads each error, fixes the call and answers.
	calls := api.calls.Load()
	res = finish(start("orders", "how many orders has customer 4?"))
	require.Equal(t, "Customer 4 has 2 orders.", res.Output)
	var got []string
	for _, c := range res.Metadata.ToolCalls {
		var args struct {
			Op     string         `json:"operation_id"`
			Params map[string]any `json:"params"`
		}
		require.NoError(t, json.Unmarshal(c.Args, &args))
		got = append(got, c.Status+" "+args.Op)
	}
	require.Equal(t, []string{"error customerOrders", "error listOrders", "ok listOrders"}, got)
	require.Equal(t, calls+1, api.calls.Load(), "the refused calls were not sent")
	steps, err := e.Store().Steps(ctx, "sales", job)
	require.NoError(t, err)
	var errs []string
	for _, s := range steps {
		if strings.HasPrefix(s.Content, "error: ") {
			errs = append(errs, s.Content)
		}
	}
	require.Equal(t, []string{
		`error: crm: unknown operation_id "customerOrders"; the operations are searchCustomers, getCustomer, listOrders, createOrder, cancelOrder`,
		`error: crm: listOrders: parameter "customerId" (path) is required`,
	}, errs)

	// The document was fetched once for this catalog version; applying
	// the catalog again fetches it again.
	require.EqualValues(t, 1, api.docs.Load())
	e.ApplyCatalog(t, catalog)
	require.EqualValues(t, 2, api.docs.Load())

	e.requireNoSecret(token)
}
