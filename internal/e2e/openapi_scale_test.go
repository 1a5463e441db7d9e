package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
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
	"github.com/agentflow/agentflow/internal/openapi/openapitest"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// largeScript asks the widgets API for a widget and answers with its
// owner's city, read from the answer the narrowed document describes.
const largeScript = `
rules:
  - name: widget
    when: {user: '(?i)^where is the owner of widget (?P<id>[0-9]+)\?$'}
    reply:
      tool_calls: [{name: widgets, arguments: '{"operation_id": "getWidget", "params": {"widgetId": ${id}}}'}]
  - name: answer
    when: {tool: '(?s)^getWidget answered 200 OK.*"city":"(?P<city>[^"]+)"'}
    reply: {text: 'In ${city}.'}
  - name: tool-error
    when: {tool: '(?s)^error: (.+)$'}
    reply: {text: 'The API said: $1'}
`

// largeCatalog names a document of 12 MiB by spec_url, narrowed to two of
// its operations. URL and HOST stand for its server's URL and host:port.
const largeCatalog = `
tenant: demo
default_agent: assistant
egress: ["HOST"]
tools:
  - name: widgets
    kind: openapi_action
    config:
      spec_url: URL/openapi.json
      operations: [getWidget, createWidget]
      auth: [{type: api_key, name: X-Api-Key, secret: "env:TEST_WIDGET_KEY"}]
agents:
  - id: assistant
    model: openai:gpt-4o-mini
    tools: [widgets]
    limits: {max_iterations: 4, turn_timeout_sec: 120}
`

// TestOpenAPILargeDocument applies a catalog whose openapi_action entry
// names a 12 MiB document by spec_url — larger than the egress client's
// cap on answers and the old 4 MiB cap on documents — narrowed to two
// operations: the agent's pinned version holds those and the components
// they use, nothing else of the document, and a turn calls one of them.
// (TestOpenAPILargeSpec in internal/tools measures the memory of the
// apply.)
func TestOpenAPILargeDocument(t *testing.T) {
	key := "widget-key-" + testserver.RandomID()
	t.Setenv("TEST_WIDGET_KEY", key)
	doc := openapitest.Large(12 << 20)
	api := openapitest.NewAPI(key)
	var docs, calls atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/openapi.json" {
			docs.Add(1)
			w.Header().Set("Content-Length", strconv.Itoa(len(doc)))
			_, _ = w.Write(doc)
			return
		}
		calls.Add(1)
		api.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	catalog := strings.NewReplacer("URL", s.URL, "HOST", strings.TrimPrefix(s.URL, "http://")).Replace(largeCatalog)
	srv := testserver.Start(t, testserver.Options{Script: largeScript, Catalogs: []string{catalog}})
	require.EqualValues(t, 1, docs.Load(), "applying the catalog fetched the document")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req := agent.TurnRequest{Version: agent.ProtocolVersion, TenantID: "demo", JobID: "widget-" + testserver.RandomID(), Prompt: "where is the owner of widget 1?"}
	run, err := turnclient.Start(ctx, srv.Client(), srv.TaskQueue, req)
	require.NoError(t, err)
	res, err := turnclient.Result(ctx, run)
	require.NoError(t, err)
	require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
	require.Equal(t, "In Paris.", res.Output)
	require.EqualValues(t, 1, calls.Load())

	// The version the turn ran with holds only what the two operations need.
	ag, err := srv.Store().AgentVersion(ctx, "demo", "assistant", res.Metadata.AgentVersion)
	require.NoError(t, err)
	require.Len(t, ag.Tools, 1)
	var cfg struct {
		SpecURL string `json:"spec_url"`
		Spec    struct {
			Paths      map[string]map[string]json.RawMessage `json:"paths"`
			Components map[string]map[string]json.RawMessage `json:"components"`
		} `json:"spec"`
	}
	require.NoError(t, json.Unmarshal(ag.Tools[0].Config, &cfg))
	require.Empty(t, cfg.SpecURL)
	require.Less(t, len(ag.Tools[0].Config), 8<<10)
	var comps []string
	for section, names := range cfg.Spec.Components {
		for name := range names {
			comps = append(comps, section+"/"+name)
		}
	}
	require.ElementsMatch(t, openapitest.Needed, comps)
	for _, c := range openapitest.Unneeded {
		require.NotContains(t, comps, c)
	}
	require.Len(t, cfg.Spec.Paths, 2)
	require.NotContains(t, cfg.Spec.Paths["/widgets"], "get", "listWidgets, of a kept path, is not granted")
}

// urlScript has the model name the CRM's document by URL: the customer
// question gives the URL, a profile and a customer; an answer from the
// API is answered with the customer's name, an error with the error.
const urlScript = `
rules:
  - name: lookup
    when: {user: '(?i)^as (?P<profile>\w+), who is customer (?P<id>[0-9]+) at (?P<url>\S+)\?$'}
    reply:
      tool_calls: [{name: any_api, arguments: '{"openapi_url": "${url}", "operation_id": "getCustomer", "params": {"customerId": ${id}}, "auth_profile": "${profile}"}'}]
  - name: customer
    when: {tool: '(?s)^getCustomer answered 200 OK.*"name":"(?P<name>[^"]+)"'}
    reply: {text: 'That is ${name}.'}
  - name: tool-error
    when: {tool: '(?s)^error: (.+)$'}
    reply: {text: 'The API said: $1'}
`

// urlCatalog lets the agent call APIs whose documents it names, from the
// CRM's host only, with the CRM's token under two profiles; a call as
// admin, or of a document not on the CRM, waits for a person. {CRM} and
// {OTHER} stand for two servers' host:port, both in the tenant's egress.
const urlCatalog = `
tenant: sales
default_agent: sales
egress: ["{CRM}", "{OTHER}"]
tools:
  - name: any_api
    kind: openapi_action
    approval: 'args.auth_profile == "admin" || !args.openapi_url.startsWith("http://{CRM}/")'
    config:
      openapi_url: {allowed_hosts: ["{CRM}"], ttl_sec: 600}
      methods: [GET]
      auth_profiles:
        reader: {host: "{CRM}", auth: [{type: bearer, secret: "env:TEST_CRM_TOKEN"}]}
        admin: {host: "{CRM}", auth: [{type: bearer, secret: "env:TEST_CRM_TOKEN"}]}
agents:
  - id: sales
    model: openai:gpt-4o-mini
    tools: [any_api]
    limits: {max_iterations: 4, turn_timeout_sec: 120, approval_timeout_sec: 300}
`

// TestOpenAPIURLTurns: turns call an API whose document the model names
// by URL (seed 004 §5.4). A document on the allowed host is fetched once
// for its TTL however many turns name it; one on another host is refused
// before anything is asked of that host; the approval policy reads
// openapi_url and auth_profile, so a call as admin waits for a person and
// runs once approved; the token never leaves the worker.
func TestOpenAPIURLTurns(t *testing.T) {
	token := "crm-token-" + testserver.RandomID() + testserver.RandomID()
	t.Setenv("TEST_CRM_TOKEN", token)
	api, other := startCRM(t, token), startCRM(t, token)
	host := func(s *crmAPI) string { return strings.TrimPrefix(s.URL, "http://") }
	catalog := strings.NewReplacer("{CRM}", host(api), "{OTHER}", host(other)).Replace(urlCatalog)
	logger, log := keptLog(t, zap.WarnLevel)
	srv := testserver.Start(t, testserver.Options{Script: urlScript, Catalogs: []string{catalog}, Logger: logger})
	e := &dataEnv{env: &env{Server: srv, t: t}, log: log}
	require.EqualValues(t, 0, api.docs.Load(), "nothing is fetched when the catalog is applied")

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := func(prompt string) client.WorkflowRun {
		t.Helper()
		run, err := turnclient.Start(ctx, e.Client(), e.TaskQueue, agent.TurnRequest{Version: agent.ProtocolVersion,
			TenantID: "sales", JobID: "url-" + testserver.RandomID(), Prompt: prompt})
		require.NoError(t, err)
		e.ids = append(e.ids, run.GetID())
		return run
	}
	finish := func(run client.WorkflowRun) agent.TurnResult {
		t.Helper()
		res, err := turnclient.Result(ctx, run)
		require.NoError(t, err)
		require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
		return res
	}
	doc := api.URL + "/openapi.json"

	// Reads with the reader profile, of a document on the CRM: no person.
	for _, id := range []int{7, 3, 7} {
		res := finish(start("as reader, who is customer " + strconv.Itoa(id) + " at " + doc + "?"))
		want, _ := crm.CustomerByID(id)
		require.Equal(t, "That is "+want.Name+".", res.Output)
		require.Equal(t, agent.ToolOK, res.Metadata.ToolCalls[0].Status)
	}
	require.EqualValues(t, 3, api.calls.Load(), "each call reached the API with the profile's token")
	require.EqualValues(t, 1, api.docs.Load(), "the document was fetched once in its TTL")

	// A document on another host: refused before that host hears of it.
	// (The policy asks a person first: the URL is not the CRM's.)
	run := start("as reader, who is customer 7 at " + other.URL + "/openapi.json?")
	p := e.awaitPending(run.GetID())
	e.approve(ctx, run.GetID(), p.CallID)
	res := finish(run)
	require.Equal(t, "The API said: any_api: openapi_url "+other.URL+"/openapi.json: "+host(other)+" is not a host this tool reads documents from ("+host(api)+")", res.Output)
	require.Equal(t, agent.ToolError, res.Metadata.ToolCalls[0].Status)
	require.EqualValues(t, 0, other.docs.Load()+other.calls.Load(), "nothing was asked of the other host")

	// As admin: the policy reads auth_profile, and the call waits.
	run = start("as admin, who is customer 5 at " + doc + "?")
	p = e.awaitPending(run.GetID())
	require.JSONEq(t, `{"openapi_url": "`+doc+`", "operation_id": "getCustomer", "params": {"customerId": 5}, "auth_profile": "admin"}`, string(p.Args))
	require.EqualValues(t, 3, api.calls.Load(), "nothing is sent while the call waits")
	e.approve(ctx, run.GetID(), p.CallID)
	res = finish(run)
	want, _ := crm.CustomerByID(5)
	require.Equal(t, "That is "+want.Name+".", res.Output)
	require.EqualValues(t, 4, api.calls.Load())
	require.EqualValues(t, 1, api.docs.Load())

	// A profile the entry does not have is refused before any request.
	res = finish(start("as root, who is customer 5 at " + doc + "?"))
	require.Equal(t, `The API said: any_api: auth_profile "root": this tool's profiles are admin, reader`, res.Output)
	require.EqualValues(t, 4, api.calls.Load())

	e.requireNoSecret(token)
}

// approve approves a waiting call through the approve update.
func (e *dataEnv) approve(ctx context.Context, workflowID, callID string) {
	t := e.t
	t.Helper()
	h, err := e.Client().UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: workflowID, UpdateName: contract.UpdateApprove, WaitForStage: client.WorkflowUpdateStageCompleted,
		Args: []any{agent.NewApprovalDecision(callID, true, "", "ana")},
	})
	require.NoError(t, err)
	var ack contract.ApprovalAck
	require.NoError(t, h.Get(ctx, &ack))
	require.Equal(t, agent.ApprovalApproved, ack.Outcome)
}
