package ownworker

import (
	"context"
	"regexp"

	"github.com/agentflow/agentflow"
)

// temperature is a number of degrees in an answer, with its unit if it
// states one.
var temperature = regexp.MustCompile(`(-?\d+(?:\.\d+)?)\s*(°\s*[CF])?`)

// UnitsStated is a scorer of the team's own: an answer that gives a
// temperature states its unit. It has nothing to say about an answer
// without a number.
func UnitsStated() agentflow.Scorer {
	return agentflow.Scorer{
		Name: "units-stated",
		Score: func(_ context.Context, _ agentflow.EvalCase, res agentflow.TurnResult) ([]agentflow.EvalCheck, error) {
			found := temperature.FindAllStringSubmatch(res.Output, -1)
			if len(found) == 0 {
				return nil, nil
			}
			for _, m := range found {
				if m[2] == "" {
					return []agentflow.EvalCheck{{Passed: false, Detail: "the answer gives " + m[1] + " without a unit"}}, nil
				}
			}
			return []agentflow.EvalCheck{{Passed: true}}, nil
		},
	}
}
