package ws

import (
	"crypto/tls"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
)

func TestDecodeCommand(t *testing.T) {
	approved := true
	tests := []struct {
		name, data string
		typ, id    string
		want       proto.Message
		problem    string
	}{
		{"start", `{"type":"start","id":"c1","prompt":"hi","agent_id":"a"}`, "start", "c1", &pb.TurnRequest{Prompt: "hi", AgentId: "a"}, ""},
		{"message", `{"type":"message","session_id":"s1","prompt":"hi"}`, "message", "", &pb.SendMessageRequest{SessionId: "s1", Prompt: "hi"}, ""},
		{"follow", `{"type":"follow","id":"f","stream_id":"turn/demo/j","after_index":"12"}`, "follow", "f", &pb.ResumeRequest{StreamId: "turn/demo/j", AfterIndex: 12}, ""},
		{"follow, a number index", `{"type":"follow","stream_id":"turn/demo/j","after_index":3}`, "follow", "", &pb.ResumeRequest{StreamId: "turn/demo/j", AfterIndex: 3}, ""},
		{"approve", `{"type":"approve","stream_id":"turn/demo/j","call_id":"c","approved":true,"reason":"ok"}`, "approve", "",
			&pb.ApproveRequest{StreamId: "turn/demo/j", CallId: "c", Approved: &approved, Reason: "ok"}, ""},
		{"cancel", `{"type":"cancel","stream_id":"turn/demo/j"}`, "cancel", "", &pb.CancelRequest{StreamId: "turn/demo/j"}, ""},
		{"not JSON", `{"type":`, "", "", nil, "a command is a JSON object"},
		{"two values", `{"type":"cancel"} {}`, "", "", nil, "more after the JSON value"},
		{"an array", `["cancel"]`, "", "", nil, "a command is a JSON object, with a type"},
		{"null", `null`, "", "", nil, "a command is a JSON object, with a type"},
		{"no type", `{"id":"c9","prompt":"hi"}`, "", "c9", nil, "a command needs a type: start, message, follow, approve, cancel"},
		{"a type not a string", `{"type":1}`, "", "", nil, "a command needs a type"},
		{"an unknown type", `{"type":"delete","id":"c2"}`, "", "c2", nil, `unknown command type "delete"`},
		{"an unknown field", `{"type":"cancel","id":"c3","stream_id":"turn/demo/j","tenant_id":"rival"}`, "cancel", "c3", nil, `cancel command: `},
		{"a field of the wrong type", `{"type":"approve","approved":"yes"}`, "approve", "", nil, "approve command: "},
		{"a long id", `{"type":"cancel","id":"` + strings.Repeat("x", 65) + `"}`, "", "", nil, "a command's id is a string of at most 64 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd, err := decodeCommand([]byte(tt.data))
			require.Equal(t, tt.id, cmd.ID)
			require.Equal(t, tt.typ, cmd.Type)
			if tt.problem != "" {
				require.ErrorContains(t, err, tt.problem)
				require.True(t, agent.IsCode(err, agent.CodeInvalid))
				return
			}
			require.NoError(t, err)
			require.True(t, proto.Equal(tt.want, cmd.msg), "want %v\ngot  %v", tt.want, cmd.msg)
			require.Equal(t, tt.typ, cmd.kind.typ)
		})
	}
}

// TestDecodeCommandOwnRequest: each command reads into a request of its
// own, so that commands in flight share nothing; the table's requests
// stay empty.
func TestDecodeCommandOwnRequest(t *testing.T) {
	a, err := decodeCommand([]byte(`{"type":"cancel","stream_id":"turn/demo/a"}`))
	require.NoError(t, err)
	b, err := decodeCommand([]byte(`{"type":"cancel","stream_id":"turn/demo/b"}`))
	require.NoError(t, err)
	require.Equal(t, "turn/demo/a", a.msg.(*pb.CancelRequest).GetStreamId())
	require.Equal(t, "turn/demo/b", b.msg.(*pb.CancelRequest).GetStreamId())
	require.Same(t, a.kind, b.kind)
	for _, k := range socketCommandKinds {
		require.Zero(t, proto.Size(k.msg), "the %s command's request in the table", k.typ)
	}
}

// FuzzDecodeCommand: any message a client sends is a command with its
// request, or CodeInvalid; never a panic.
func FuzzDecodeCommand(f *testing.F) {
	for _, s := range []string{`{"type":"start","id":"c1","prompt":"hi"}`, `{"type":"approve","stream_id":"turn/a/b","call_id":"c","approved":false}`,
		`{"type":"follow","stream_id":"turn/a/b","after_index":"-1"}`, `{"type":"message","session_id":"s","context":{"metadata":{"k":"v"}}}`,
		`{"type":"cancel","type":"start"}`, `[]`, `{"type":null}`, "\x00"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cmd, err := decodeCommand(data)
		if err != nil {
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			require.LessOrEqual(t, len(cmd.ID), maxCommandID)
			return
		}
		require.Contains(t, socketCommands, cmd.Type)
		require.NotNil(t, cmd.msg)
	})
}

func TestSocketAuthorization(t *testing.T) {
	enc := base64.RawURLEncoding.EncodeToString([]byte("s3cret/+="))
	tests := []struct {
		name    string
		header  http.Header
		want    []string
		problem string
	}{
		{"the header", http.Header{"Authorization": {"Bearer tok"}}, []string{"Bearer tok"}, ""},
		{"a browser's subprotocols", http.Header{"Sec-Websocket-Protocol": {SocketProtocol + ", " + SocketBearerPrefix + enc}}, []string{"Bearer s3cret/+="}, ""},
		{"padded", http.Header{"Sec-Websocket-Protocol": {SocketProtocol, SocketBearerPrefix + base64.URLEncoding.EncodeToString([]byte("tok"))}}, []string{"Bearer tok"}, ""},
		{"the header wins", http.Header{"Authorization": {"Bearer a"}, "Sec-Websocket-Protocol": {SocketProtocol + "," + SocketBearerPrefix + enc}}, []string{"Bearer a"}, ""},
		{"nothing", http.Header{}, nil, "missing bearer token"},
		{"the token without the protocol", http.Header{"Sec-Websocket-Protocol": {SocketBearerPrefix + enc}}, nil, "needs the subprotocol agentflow.v1 offered beside it"},
		{"not base64url", http.Header{"Sec-Websocket-Protocol": {SocketProtocol + "," + SocketBearerPrefix + "a*b"}}, nil, "malformed subprotocol"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := socketAuthorization(&http.Request{Header: tt.header})
			if tt.problem != "" {
				require.ErrorContains(t, err, tt.problem)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

// TestSocketOrigin: a page may open a socket from the API's own origin or
// one of AGENTFLOW_CORS_ORIGINS, origins compared whole (scheme, host and
// port, a default port written or not), as browsers compare them.
func TestSocketOrigin(t *testing.T) {
	tok, err := gateway.NewToken("tok", "demo", "ana", gateway.RoleUser)
	require.NoError(t, err)
	svc, err := gateway.New(gateway.Options{Tokens: []gateway.Token{tok}})
	require.NoError(t, err)
	api, err := gateway.NewHTTPAPI(svc, nil, gateway.HTTPOptions{CORSOrigins: []string{"http://app.example.com:3000", "https://web.example.com"}})
	require.NoError(t, err)
	t.Cleanup(func() { api.Stop(0) })
	tests := []struct {
		name, host, origin string
		tls                bool
		forwardedProto     string
		ok                 bool
	}{
		{name: "no origin: no browser", host: "api.example.com:8080", ok: true},
		{name: "the API's own", host: "api.example.com:8080", origin: "http://api.example.com:8080", ok: true},
		{name: "the API's own, in capitals", host: "api.example.com:8080", origin: "http://API.example.com:8080", ok: true},
		{name: "the API's host over https", host: "api.example.com:8080", origin: "https://api.example.com:8080"},
		{name: "the API's host on another port", host: "api.example.com:8080", origin: "http://api.example.com"},
		{name: "the API's own over TLS", host: "api.example.com", tls: true, origin: "https://api.example.com", ok: true},
		{name: "the API's own over TLS, its port written", host: "api.example.com:443", tls: true, origin: "https://api.example.com", ok: true},
		{name: "plain http of an API served over TLS", host: "api.example.com", tls: true, origin: "http://api.example.com"},
		{name: "behind a proxy that ends TLS", host: "api.example.com", forwardedProto: "https", origin: "https://api.example.com", ok: true},
		{name: "plain http of an API behind a proxy that ends TLS", host: "api.example.com", forwardedProto: "https", origin: "http://api.example.com"},
		{name: "an allowed origin", host: "api.example.com:8080", origin: "http://app.example.com:3000", ok: true},
		{name: "an allowed origin over https", host: "api.example.com:8080", origin: "https://app.example.com:3000"},
		{name: "an allowed origin on another port", host: "api.example.com:8080", origin: "http://app.example.com:3001"},
		{name: "an allowed https origin, its default port written", host: "api.example.com:8080", origin: "https://web.example.com:443", ok: true},
		{name: "an allowed https origin over http", host: "api.example.com:8080", origin: "http://web.example.com"},
		{name: "another origin", host: "api.example.com:8080", origin: "http://evil.example.com:8080"},
		{name: "an opaque origin", host: "api.example.com:8080", origin: "null"},
		{name: "not an origin", host: "api.example.com:8080", origin: "http://api.example.com:8080/page"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/v1/socket", nil)
			r.Host = tt.host
			r.TLS = nil
			if tt.tls {
				r.TLS = &tls.ConnectionState{}
			}
			if tt.origin != "" {
				r.Header.Set("Origin", tt.origin)
			}
			if tt.forwardedProto != "" {
				r.Header.Set("X-Forwarded-Proto", tt.forwardedProto)
			}
			err := (&server{api}).socketOrigin(r)
			if tt.ok {
				require.NoError(t, err)
				return
			}
			require.True(t, agent.IsCode(err, agent.CodePermissionDenied), "%v", err)
			require.ErrorContains(t, err, "AGENTFLOW_CORS_ORIGINS")
		})
	}
}
