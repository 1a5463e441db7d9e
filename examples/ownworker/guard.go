package ownworker

import (
	"context"
	"regexp"

	"github.com/agentflow/agentflow"
)

// cardNumber is a run of 13 to 19 digits, spaces or dashes between them.
var cardNumber = regexp.MustCompile(`\b\d(?:[ -]?\d){12,18}\b`)

// NoCardNumbers is a guard of the team's own: no model call is made with
// a card number in what a person wrote. It refuses the call, and the
// turn ends GuardrailTripped with the reason; the model never sees it.
func NoCardNumbers() agentflow.Hook {
	return agentflow.Hook{
		Name: "no-card-numbers",
		ModelStart: func(ctx context.Context, c *agentflow.ModelCall) (context.Context, error) {
			for _, m := range c.Messages {
				if m.Role == "user" && cardNumber.MatchString(m.Content) {
					return ctx, agentflow.Refuse("a card number was written: this agent does not take them")
				}
			}
			return ctx, nil
		},
	}
}
