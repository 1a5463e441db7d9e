package a2a

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/stretchr/testify/require"
)

// TestA2AV1ListDecode: ListTasks's params decode to the door's query, or
// to 1.0's InvalidParams (-32602) saying what is wrong.
func TestA2AV1ListDecode(t *testing.T) {
	token := a2aCursor{Batch: []byte("batch"), Skip: 3}.token()
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name, params string
		want         a2aListQuery
		err          string
	}{
		{"none", ``, a2aListQuery{pageSize: 50}, ""},
		{"empty", `{}`, a2aListQuery{pageSize: 50}, ""},
		{"every filter", `{"tenant":"ignored","contextId":"c1","status":"TASK_STATE_INPUT_REQUIRED","pageSize":2,"pageToken":"` + token +
			`","historyLength":0,"statusTimestampAfter":"2026-01-02T03:04:05Z","includeArtifacts":true}`,
			a2aListQuery{contextID: "c1", state: a2a.TaskStateInputRequired, since: since, pageSize: 2,
				cursor: a2aCursor{Batch: []byte("batch"), Skip: 3}, includeArtifacts: true}, ""},
		{"a state by number", `{"status":3}`, a2aListQuery{state: a2a.TaskStateCompleted, pageSize: 50}, ""},
		{"unspecified is any state", `{"status":"TASK_STATE_UNSPECIFIED"}`, a2aListQuery{pageSize: 50}, ""},
		{"the largest page", `{"pageSize":100}`, a2aListQuery{pageSize: 100}, ""},
		{"not an object", `[]`, a2aListQuery{}, "params must be an object"},
		{"an unknown state", `{"status":"TASK_STATE_SLEEPING"}`, a2aListQuery{}, `params.status "TASK_STATE_SLEEPING" is not a task state`},
		{"0.3's state name", `{"status":"working"}`, a2aListQuery{}, `params.status "working" is not a task state`},
		{"an unknown state number", `{"status":42}`, a2aListQuery{}, `params.status "42" is not a task state`},
		{"a state of the wrong type", `{"status":{}}`, a2aListQuery{}, "params.status must be"},
		{"a page of none", `{"pageSize":0}`, a2aListQuery{}, "params.pageSize is 0: want 1 to 100"},
		{"a page too large", `{"pageSize":101}`, a2aListQuery{}, "params.pageSize is 101: want 1 to 100"},
		{"a page size of the wrong type", `{"pageSize":"ten"}`, a2aListQuery{}, "params.pageSize"},
		{"a token not base64", `{"pageToken":"%%%"}`, a2aListQuery{}, "params.pageToken is not a token ListTasks gave"},
		{"a token not JSON", `{"pageToken":"` + "bm90IGpzb24" + `"}`, a2aListQuery{}, "params.pageToken is not a token ListTasks gave"},
		{"a token past its batch", `{"pageToken":"` + a2aCursor{Batch: []byte("b"), Skip: a2aListBatch}.token() + `"}`, a2aListQuery{}, "params.pageToken"},
		{"a token before its batch", `{"pageToken":"` + a2aCursor{Skip: -1}.token() + `"}`, a2aListQuery{}, "params.pageToken"},
		{"a negative history", `{"historyLength":-1}`, a2aListQuery{}, "params.historyLength is -1"},
		{"a context with a slash", `{"contextId":"a/b"}`, a2aListQuery{}, "may not contain"},
		{"a time that is not one", `{"statusTimestampAfter":"yesterday"}`, a2aListQuery{}, "params are not of 1.0's shape"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := decodeA2AV1List(json.RawMessage(tc.params))
			if tc.err == "" {
				require.NoError(t, err)
				require.Equal(t, tc.want, q)
				return
			}
			require.Error(t, err)
			e := a2aV1ErrorOf(err)
			require.Equal(t, -32602, e["code"], "%v", err)
			require.Contains(t, e["message"], tc.err)
		})
	}
}

// FuzzA2AV1List: any ListTasks params decode to a query within the
// door's bounds, or to InvalidParams, never a panic; a page token the
// door gives decodes to where it points.
func FuzzA2AV1List(f *testing.F) {
	f.Add(`{}`)
	f.Add(`{"contextId":"c","status":"TASK_STATE_WORKING","pageSize":10,"historyLength":2,"includeArtifacts":true}`)
	f.Add(`{"status":6,"pageToken":"` + a2aCursor{Batch: []byte{0, 1, 2}, Skip: 7}.token() + `"}`)
	f.Add(`{"statusTimestampAfter":"2026-01-02T03:04:05.123Z","pageSize":100}`)
	f.Add(`{"pageToken":"eyJzIjo1fQ"}`)
	f.Add(`null`)
	f.Fuzz(func(t *testing.T, params string) {
		q, err := decodeA2AV1List(json.RawMessage(params))
		if err != nil {
			require.True(t, errors.Is(err, a2a.ErrInvalidParams), "InvalidParams: %v", err)
			return
		}
		require.GreaterOrEqual(t, q.pageSize, 1)
		require.LessOrEqual(t, q.pageSize, a2aListMax)
		require.GreaterOrEqual(t, q.cursor.Skip, 0)
		require.Less(t, q.cursor.Skip, a2aListBatch)
		if q.state != "" {
			_, named := v1States[q.state]
			require.True(t, named, "a state 1.0 names: %s", q.state)
		}
		if q.contextID != "" {
			require.NoError(t, checkContextID(q.contextID))
		}
		if q.cursor.Batch != nil || q.cursor.Skip != 0 {
			back, err := decodeA2ACursor(q.cursor.token())
			require.NoError(t, err)
			require.Equal(t, q.cursor, back)
		}
	})
}
