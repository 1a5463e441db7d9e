package docs

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
)

// protoFile is the API the gRPC reference describes, from this folder.
const protoFile = "../proto/agentflow/v1/agentflow.proto"

var (
	protoCommentRE = regexp.MustCompile(`//[^\n]*`)
	protoServiceRE = regexp.MustCompile(`(?m)^service\s+(\w+)\s*\{`)
	protoRPCRE     = regexp.MustCompile(`\brpc\s+(\w+)\s*\(`)
	protoMessageRE = regexp.MustCompile(`(?m)^\s*(?:message|enum)\s+(\w+)\s*\{`)
)

// protoAPI is what a .proto declares: each service's rpcs in order, and
// its message and enum names.
type protoAPI struct {
	services map[string][]string
	messages map[string]bool
}

// parseProto reads the service blocks (the rpcs between a service's
// brace and the brace that closes it) and the message and enum names of
// a .proto's text, comments left out.
func parseProto(text string) protoAPI {
	text = protoCommentRE.ReplaceAllString(text, "")
	api := protoAPI{services: map[string][]string{}, messages: map[string]bool{}}
	for _, m := range protoServiceRE.FindAllStringSubmatchIndex(text, -1) {
		name := text[m[2]:m[3]]
		body, depth := text[m[1]:], 1
		for i, r := range body {
			if r == '{' {
				depth++
			} else if r == '}' {
				depth--
			}
			if depth == 0 {
				body = body[:i]
				break
			}
		}
		rpcs := []string{}
		for _, r := range protoRPCRE.FindAllStringSubmatch(body, -1) {
			rpcs = append(rpcs, r[1])
		}
		api.services[name] = rpcs
	}
	for _, m := range protoMessageRE.FindAllStringSubmatch(text, -1) {
		api.messages[m[1]] = true
	}
	return api
}

func TestParseProto(t *testing.T) {
	for _, tc := range []struct {
		name     string
		proto    string
		services map[string][]string
		messages []string
	}{
		{
			name: "rpcs of each service, streaming ones too",
			proto: "service A {\n  rpc One(OneRequest) returns (OneResponse);\n" +
				"  rpc Two(TwoRequest) returns (stream Event);\n}\n\nservice B {\n  rpc Three(X) returns (Y);\n}\n",
			services: map[string][]string{"A": {"One", "Two"}, "B": {"Three"}},
		},
		{
			name: "an rpc in a comment is none",
			proto: "// service Old { rpc Gone(X) returns (Y); }\nservice A {\n  // rpc Later(X) returns (Y);\n" +
				"  rpc One(X) returns (Y); // not rpc Two(X)\n}\n",
			services: map[string][]string{"A": {"One"}},
		},
		{
			name: "an rpc with options ends at its service's brace",
			proto: "service A {\n  rpc One(X) returns (Y) {\n    option deprecated = true;\n  }\n}\n" +
				"message X {\n  string rpc = 1;\n}\nenum Status {\n  STATUS_UNSPECIFIED = 0;\n}\n",
			services: map[string][]string{"A": {"One"}},
			messages: []string{"X", "Status"},
		},
		{
			name:     "no service",
			proto:    "syntax = \"proto3\";\nmessage M {}\n",
			services: map[string][]string{},
			messages: []string{"M"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := parseProto(tc.proto)
			require.Equal(t, tc.services, api.services)
			for _, m := range tc.messages {
				require.True(t, api.messages[m], "message %s", m)
			}
		})
	}
}

// TestGRPCAPIPage: reference/grpc-api.md has a section for each service
// of agentflow.proto and, under it, a method heading for each of its rpcs
// and for nothing else; its message headings, and every message, rpc,
// service and status it names, are the .proto's. So the page cannot drift
// from the API: an rpc added, renamed or removed fails here until the
// page says so.
func TestGRPCAPIPage(t *testing.T) {
	data, err := os.ReadFile(protoFile)
	require.NoError(t, err)
	api := parseProto(string(data))
	require.NotEmpty(t, api.services, "%s has services", protoFile)

	page, err := Page("reference/grpc-api.md")
	require.NoError(t, err)
	documented := map[string][]string{} // the method headings under each service's section
	var messages []string               // the headings under Messages
	section := ""
	for _, h := range headings(strings.SplitAfter(page, "\n")) {
		switch h.level {
		case 2:
			section = h.text
			if _, ok := api.services[section]; ok {
				documented[section] = []string{}
			} else {
				require.False(t, strings.HasSuffix(section, "Service"), "the page's section %q is no service of %s", section, protoFile)
			}
		case 3:
			if _, ok := documented[section]; ok {
				documented[section] = append(documented[section], h.text)
			} else if section == "Messages" {
				messages = append(messages, h.text)
			}
		}
	}

	for service, rpcs := range api.services {
		t.Run(service, func(t *testing.T) {
			methods, ok := documented[service]
			require.True(t, ok, "the page has a section ## %s", service)
			for _, m := range methods {
				require.Contains(t, rpcs, m, "the page's method heading ### %s is no rpc of %s", m, service)
			}
			for _, rpc := range rpcs {
				require.Contains(t, methods, rpc, "%s.%s has no method heading ### %s on the page", service, rpc, rpc)
			}
			require.Len(t, methods, len(rpcs), "each rpc of %s has one method heading", service)
		})
	}

	require.NotEmpty(t, messages, "the page has a Messages section")
	for _, m := range messages {
		require.True(t, api.messages[m], "the page's message heading ### %s is no message of %s", m, protoFile)
	}
	// Every name the page writes as code that looks like one of the API's
	// (`TurnRequest`, `Invoke`, `STATUS_FAILED`) is the .proto's, an error
	// type of reference/errors.md's table or a gRPC code.
	known := map[string]bool{}
	for service, rpcs := range api.services {
		known[service] = true
		for _, rpc := range rpcs {
			known[rpc] = true
		}
	}
	for m := range api.messages {
		known[m] = true
	}
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		known[c.String()] = true
	}
	errs, err := Page("reference/errors.md")
	require.NoError(t, err)
	for _, m := range regexp.MustCompile("(?m)^\\| `(\\w+)` \\|").FindAllStringSubmatch(errs, -1) {
		known[m[1]] = true
	}
	require.True(t, known["InvalidRequest"], "reference/errors.md's table was read")
	named := regexp.MustCompile("`([A-Z][A-Za-z]*)`").FindAllStringSubmatch(page, -1)
	require.Greater(t, len(named), 100)
	for _, m := range named {
		require.True(t, known[m[1]], "the page names `%s`, which is no service, rpc, message or error of the API", m[1])
	}
	for _, m := range regexp.MustCompile("`(STATUS_[A-Z_]+)`").FindAllStringSubmatch(page, -1) {
		value := regexp.MustCompile(`(?m)^\s*` + m[1] + ` = \d+;`)
		require.True(t, value.MatchString(string(data)), "the page names `%s`, which is no value of %s", m[1], protoFile)
	}
}
