package telegram

import (
	"net/http"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
)

// Errors is the door's row of the gateway's error table: the HTTP API's
// problems, but that a post's credential is the bot's secret, which has
// no roles (no permission is denied), and that a route naming no bot is
// refused as a wrong secret is (401), so that a stranger learns nothing
// of which bots exist. Telegram posts an update again while its answer is
// not a 2xx.
var Errors = gateway.NewDoorErrors("Telegram webhook", agent.ChannelTelegram, func(class agent.Code) gateway.DoorError {
	switch class {
	case agent.CodePermissionDenied:
		return gateway.DoorError{}
	case agent.CodeNotFound:
		return gateway.DoorError{HTTP: http.StatusUnauthorized}
	}
	return gateway.DoorError{HTTP: class.Class().HTTP}
})
