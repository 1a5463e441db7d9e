package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/contract"
)

// searchAttributeType is the type of every search attribute in
// contract.SearchAttributes.
const searchAttributeType = enumspb.INDEXED_VALUE_TYPE_KEYWORD

// checkSearchAttributes asks the namespace for its search attributes
// before the process serves: a turn's start sets agentflow's, and the
// server refuses every start that sets one the namespace lacks, so a
// process without them would look up while no turn could run. The
// devstack registers them; a real cluster's operator adds them once, with
// the command the error gives. A server that does not let this process
// list them (Temporal Cloud's narrower API keys) cannot be checked: the
// process says so and goes on.
func (s *Server) checkSearchAttributes(ctx context.Context) error {
	err := CheckSearchAttributes(ctx, s.client.OperatorService(), s.cfg.Namespace)
	var denied *serviceerror.PermissionDenied
	var unimplemented *serviceerror.Unimplemented
	if errors.As(err, &denied) || errors.As(err, &unimplemented) {
		s.logger.Warn("search attributes not checked: the server does not list them to this process",
			zap.String("namespace", s.cfg.Namespace), zap.Strings("search_attributes", contract.SearchAttributes()), zap.Error(err))
		return nil
	}
	return err
}

// CheckSearchAttributes checks that namespace has every search attribute
// of contract.SearchAttributes registered as a Keyword. The error names
// each one missing or of another type, and the temporal CLI command that
// adds them. An error of the server's own (it could not be asked) is
// returned wrapped.
func CheckSearchAttributes(ctx context.Context, ops operatorservice.OperatorServiceClient, namespace string) error {
	resp, err := ops.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("list the search attributes of namespace %q: %w", namespace, err)
	}
	have := resp.GetCustomAttributes()
	var missing, mistyped []string
	for _, name := range contract.SearchAttributes() {
		typ, ok := have[name]
		switch {
		case !ok:
			missing = append(missing, name)
		case typ != searchAttributeType:
			mistyped = append(mistyped, name)
		}
	}
	var problems []string
	if len(missing) > 0 {
		problems = append(problems, fmt.Sprintf("namespace %q lacks the search attributes %s (%s); add them with: %s",
			namespace, strings.Join(missing, ", "), searchAttributeType.String(), createCommand(namespace, missing)))
	}
	for _, name := range mistyped {
		problems = append(problems, fmt.Sprintf("namespace %q has the search attribute %s as %s, not %s; a search attribute's type "+
			"cannot change: remove it with `temporal operator search-attribute remove --namespace %s --name %s` and add it with: %s",
			namespace, name, have[name].String(), searchAttributeType.String(), namespace, name, createCommand(namespace, []string{name})))
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// createCommand is the temporal CLI command that registers names as
// search attributes of agentflow's type.
func createCommand(namespace string, names []string) string {
	cmd := []string{"temporal operator search-attribute create --namespace", namespace}
	for _, name := range slices.Sorted(slices.Values(names)) {
		cmd = append(cmd, "--name", name, "--type", searchAttributeType.String())
	}
	return strings.Join(cmd, " ")
}
