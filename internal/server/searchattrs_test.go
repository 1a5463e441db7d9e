package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
)

// TestSearchAttributesAtStart: a process whose namespace lacks one of
// agentflow's search attributes does not start, and its error names the
// attribute and the command that adds it; one whose namespace has it as
// another type is told it cannot change and how to replace it. The
// devstack's namespace, which has them all, passes.
func TestSearchAttributesAtStart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	address, namespace := devtest.Temporal(t)
	c, err := client.DialContext(ctx, client.Options{HostPort: address, Namespace: namespace})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, CheckSearchAttributes(ctx, c.OperatorService(), namespace))

	// newNamespace registers a namespace with agentflow's search
	// attributes but the channel's, which it gives typ unless that is
	// unspecified.
	newNamespace := func(typ enumspb.IndexedValueType) string {
		ns := fmt.Sprintf("search-attributes-%d", time.Now().UnixNano())
		_, err := c.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
			Namespace: ns, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour)})
		require.NoError(t, err)
		attrs := map[string]enumspb.IndexedValueType{}
		for _, name := range contract.SearchAttributes() {
			attrs[name] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
		}
		delete(attrs, contract.SearchChannel.GetName())
		if typ != enumspb.INDEXED_VALUE_TYPE_UNSPECIFIED {
			attrs[contract.SearchChannel.GetName()] = typ
		}
		_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: ns, SearchAttributes: attrs})
		require.NoError(t, err)
		return ns
	}
	// checked waits until the namespace's attributes have reached the
	// frontend (its namespace cache refreshes every few seconds), and
	// returns what the check says then.
	checked := func(ns string, want string) {
		var last error
		require.Eventually(t, func() bool {
			last = CheckSearchAttributes(ctx, c.OperatorService(), ns)
			return last != nil && last.Error() == want
		}, time.Minute, 200*time.Millisecond, "the check of %s says %q, not %v", ns, want, &last)
	}

	lacking := newNamespace(enumspb.INDEXED_VALUE_TYPE_UNSPECIFIED)
	want := `namespace "` + lacking + `" lacks the search attributes AgentflowChannel (Keyword); add them with: ` +
		`temporal operator search-attribute create --namespace ` + lacking + ` --name AgentflowChannel --type Keyword`
	checked(lacking, want)
	cfg := Config{
		TemporalAddress: address, Namespace: lacking, TaskQueue: "search-attributes-start", DatabaseURL: devtest.Database(t),
		HTTPAddr: "off", HTTPAPIAddr: "off", Roles: []string{RoleWorker}, ObjectStore: devtest.ObjectStore(t),
	}
	_, err = New(ctx, cfg, zaptest.NewLogger(t))
	require.EqualError(t, err, want, "the process does not start")

	text := newNamespace(enumspb.INDEXED_VALUE_TYPE_TEXT)
	checked(text, `namespace "`+text+`" has the search attribute AgentflowChannel as Text, not Keyword; a search attribute's type cannot change: `+
		`remove it with `+"`temporal operator search-attribute remove --namespace "+text+" --name AgentflowChannel`"+` and add it with: `+
		`temporal operator search-attribute create --namespace `+text+` --name AgentflowChannel --type Keyword`)
}
