package e2e

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	pb "github.com/agentflow/agentflow/proto/agentflow/v1"

	"github.com/agentflow/agentflow/internal/testserver"
)

// TestA2AListTasks drives A2A 1.0's ListTasks with a2a-js's own client
// (testdata/a2a/list.mjs): the two tasks of one context are listed a
// page of one at a time, newest first, each once, the second page ending
// the list; the tenant's list holds them and a task of another context,
// and not a turn of another tenant started before; a status filter keeps
// the tasks in that state. It needs Node.js (with npm), as
// TestA2AJSClient does.
func TestA2AListTasks(t *testing.T) {
	dir := nodeClient(t, "a2a", "@a2a-js/sdk")
	e := newHTTPEnvWith(t, func(o *testserver.Options) { o.Catalogs = []string{a2aCatalog, httpCatalogs[1]} })
	var rival pb.StartResponse
	e.ok("POST", "/v1/turns", e.rival, `{"job_id": "rival-`+testserver.RandomID()+`", "prompt": "What is 12.5 * 4?"}`, &rival)

	out := runNode(t, dir, "list.mjs", nodeInput(t, map[string]string{"base": e.api, "token": e.all, "calc": "assistant"}))
	type list struct {
		Tasks         []a2aTask
		NextPageToken string
		PageSize      int
		TotalSize     int
	}
	var got struct {
		First, Second, Other a2aTask
		Page1, Page2, Tenant list
		Completed, Working   list
	}
	require.NoError(t, json.Unmarshal(out, &got), "%s", out)
	ids := func(l list) []string {
		var out []string
		for _, t := range l.Tasks {
			out = append(out, t.ID)
		}
		return out
	}

	require.Equal(t, got.First.ContextID, got.Second.ContextID, "the second message went to the first's context")
	require.NotEqual(t, got.First.ContextID, got.Other.ContextID)

	require.Equal(t, []string{got.Second.ID}, ids(got.Page1), "the newest first")
	require.Equal(t, 1, got.Page1.PageSize)
	require.Equal(t, 2, got.Page1.TotalSize)
	require.NotEmpty(t, got.Page1.NextPageToken)
	require.Equal(t, "TASK_STATE_COMPLETED", got.Page1.Tasks[0].Status.State)
	require.Equal(t, "The result is 5.", got.Page1.Tasks[0].answer(), "artifacts, as asked")
	require.Equal(t, []string{got.First.ID}, ids(got.Page2))
	require.Empty(t, got.Page2.NextPageToken, "the last page")
	require.Equal(t, "The result is 50.", got.Page2.Tasks[0].answer())

	require.Subset(t, ids(got.Tenant), []string{got.First.ID, got.Second.ID, got.Other.ID})
	require.NotContains(t, ids(got.Tenant), rival.GetStreamId(), "another tenant's turn")
	require.Empty(t, got.Tenant.NextPageToken)
	for _, task := range got.Tenant.Tasks {
		require.Empty(t, task.Artifacts, "no artifacts unless asked")
	}

	require.ElementsMatch(t, []string{got.First.ID, got.Second.ID}, ids(got.Completed))
	require.Empty(t, got.Working.Tasks, "no task of the context is working")

	// A page token the door did not give, though it reads as one: the
	// core's token in it is not Temporal's.
	forged := base64.RawURLEncoding.EncodeToString([]byte(`{"b":"bm90IGEgdG9rZW4","s":1}`))
	for name, params := range map[string]string{
		"a forged token":   `{"pageToken":"` + forged + `"}`,
		"a page too large": `{"pageSize":500}`,
	} {
		t.Run(name, func(t *testing.T) {
			code, data := e.a2aV1Call(t, "assistant", `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":`+params+`}`)
			require.Equal(t, http.StatusOK, code, "%s", data)
			var answer struct {
				Error struct {
					Code    int
					Message string
				}
			}
			require.NoError(t, json.Unmarshal(data, &answer), "%s", data)
			require.Equal(t, -32602, answer.Error.Code, "%s", data)
		})
	}
}

// a2aV1Call posts a JSON-RPC request to an A2A agent with the demo
// tenant's token, as A2A 1.0: the answer's status and body.
func (e *httpEnv) a2aV1Call(t *testing.T, agentID, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest("POST", e.api+"/a2a/"+agentID, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+e.all)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, data
}
