package workflows

// The change ids of AgentTurn and Conversation, each given to
// workflow.GetVersion where the workflow does what it did not do before. A run that started before a
// change replays the old way (GetVersion returns workflow.DefaultVersion:
// its history has no marker for the id), a run since then records the
// marker the first time it reaches the gate and goes the new way. The
// names and values are in recorded histories, so neither ever changes; a
// change that is no longer needed keeps its gate until no run from before
// it can be replayed.
//
// Each id says what it changed, and which recorded history in testdata/
// replays its new way ("Recorded:"). Most gates are reached only on a
// rare path (an outage, a bad signal, a request from the wrong tenant),
// which a recorded history of an ordinary run never takes: those name
// the workflow tests that run the new way instead. TestChangeIDs holds
// this list to the code and to the histories.
//
// Adding one: declare it here, with what it changes; gate the new
// behaviour with workflow.GetVersion(ctx, id, workflow.DefaultVersion, 1)
// and keep the old behaviour on the DefaultVersion branch; record a
// history that takes the new way (the end-to-end tests record with
// AGENTFLOW_RECORD_HISTORIES=1) and name it here.
const (
	// durableStepsChange: a database step (Route, LoadAgent, SaveResult,
	// RecordApproval) that fails because the database is away waits and
	// runs again (outlast) until the turn's deadline — SaveResult for as
	// long as it takes — and the turn's current details say it is waiting.
	// Runs before it failed the turn when the step's retries ran out.
	//
	// Recorded: none; the marker is written only when a step fails for
	// want of the database. TestDatabaseOutage,
	// TestDatabaseOutageOutlastsTheTurn and TestSavingWaitsForTheDatabase
	// run the new way.
	durableStepsChange = "durable-database-steps"

	// tenantCheckChange: a turn whose workflow id names another tenant
	// than its request (turn/<tenant>/<job>) is refused before it reads or
	// runs anything (checkTenant). Runs before it ran such a turn.
	//
	// Recorded: none; the marker is written only when the tenants differ.
	// TestWorkflowIDNamesTheTenant runs the new way.
	tenantCheckChange = "tenant-matches-workflow-id"

	// cancelChange: a cancel_turn signal or a cancellation of the workflow
	// stops the turn at its next safe point (requestCancel): the model call
	// is stopped, pending approvals close as canceled, and the turn stores
	// a canceled result and ends CANCELED. Runs before it reported a
	// cancellation as a TurnTimeout failure.
	//
	// Recorded: testdata/turn_canceled_by_signal.json,
	// testdata/turn_canceled_by_temporal.json,
	// testdata/turn_tool_canceled.json, testdata/turn_live_first_canceled.json
	// (stopped while its model streamed), testdata/turn_stopped_partial.json
	// (the same, keeping its partial answer),
	// testdata/turn_stopped_at_boundary.json (stopped before the tool calls
	// of a reply, CancelRequest.AtBoundary).
	cancelChange = "cancel-turn"

	// stopKeepsChange: a turn stopped while its model streamed keeps what
	// the model had written as its partial answer: the result's output,
	// marked partial (agent.TurnResult.Partial), a partial text block
	// logged before CANCELED, and the exchange in the session's
	// transcript. Runs before it stored a canceled result with no output.
	//
	// Recorded: testdata/turn_stopped_partial.json.
	stopKeepsChange = "stop-keeps-partial"

	// steerChange: a turn takes in the messages added to it while it runs
	// (contract.SignalSteer): each becomes a user step before the next
	// model call, and a steered event; a model that had answered answers
	// again. Runs before it had no steer signal.
	//
	// Recorded: testdata/turn_steered.json.
	steerChange = "steer-turn"

	// memoryChange: a Conversation that loads its history has its
	// session's older messages folded into a summary (contract.Summarize)
	// every summarizeEvery turns, once they outgrow the agent's memory
	// window. Runs before it ran no Summarize.
	//
	// Recorded: testdata/conversation_memory.json.
	memoryChange = "conversation-memory"

	// completeChange: an approve signal that does not say "approved" or
	// "approver" is refused and decides nothing (complete). Runs before it
	// took one as a rejection. (The approve update's validator refuses
	// such decisions before they are accepted, so it needs no gate.)
	//
	// Recorded: none; the marker is written only when an incomplete
	// signal arrives. TestIncompleteDecisionsAreRefused runs the new way.
	completeChange = "approval-complete"

	// localToolsChange: a local tool call that fails because the database
	// is away (agent.CodeUnavailable) runs again once it is back, as
	// durableStepsChange's steps do; a regular ExecuteTool activity waits
	// inside instead. Runs before it gave the model the failure as the
	// tool's.
	//
	// Recorded: none; the marker is written only when a local call fails
	// that way. TestLocalToolOutlastsTheDatabase runs the new way.
	localToolsChange = "local-tools-outlast-database"

	// boundedContextChange: a request whose context is over agent's
	// bounds (agent.TurnContext.Bounded: keys, entries, bytes) is
	// rejected. Runs before it accepted it. The gateway refuses such a
	// request before it starts a turn; the gate holds for turns started
	// with Temporal's own clients.
	//
	// Recorded: none; the marker is written only for a context over the
	// bounds. TestAgentTurnFailures ("context over bounds") runs the new
	// way.
	boundedContextChange = "bounded-context"

	// delegateChange: a call of a delegate_to_agent tool runs as a child
	// AgentTurn (see delegate.go). Runs before it had no such tools; a
	// call of one reached ExecuteTool, whose tool refuses it.
	//
	// Recorded: testdata/turn_delegated.json.
	delegateChange = "delegate-to-agent"

	// cancelToolsChange: a cancellation also stops the tool calls in
	// flight, which heartbeat (toolHeartbeat) so that it reaches them
	// within seconds; each ends canceled and is recorded so. Runs before it
	// let the calls in flight finish, and a call stuck for minutes held
	// the cancellation. Its marker is written only when a cancellation
	// finds calls in flight.
	//
	// Recorded: testdata/turn_tool_canceled.json.
	cancelToolsChange = "cancel-tools-in-flight"

	// notifyTenantChange: a turn whose notify workflow
	// (agent.TurnRequest.Notify) is neither of its own tenant nor its
	// parent is rejected (agent.TurnRequest.CheckNotify). Runs before it
	// signalled that workflow its token batches.
	//
	// Recorded: testdata/turn_notify_other_tenant.json.
	notifyTenantChange = "notify-own-tenant"

	// workflowStreamsChange: the turn answers Workflow Streams' poll update
	// over its event log (eventlog.ServeStream), and a polled run waits for
	// the polls in flight before it returns (eventlog.DrainStream). The
	// marker is written at a run's first poll only, so that a turn no one
	// polls is spared its two commands (the marker and a search-attribute
	// update). Runs before it refused the poll as an unknown update.
	//
	// Recorded: testdata/turn_workflow_streams.json,
	// testdata/turn_vocabulary.json, testdata/turn_guardrail_tripped.json
	// (polled while an output guard cut the answer).
	workflowStreamsChange = "workflow-streams"

	// vocabularyChange: the turn logs the workflow's events of the event
	// vocabulary: step_start before a step's model call, step_finish
	// (the call's usage and finish reason) once the step's tool calls
	// have ended, approval_decided when a waiting call is decided (with
	// RUNNING logged before the last decided call starts, not after it),
	// and the custom events its tool calls emit (agent.ToolProgress.Custom).
	// They change the log's indices, and so what the turn hands its
	// activities (CallModelInput.FirstIndex, the live events). The marker
	// is written at a run's first model call. Runs before it logged none
	// of them, and dropped custom events.
	//
	// Recorded: testdata/turn_ask_user.json (a question answered),
	// testdata/turn_guardrail_tripped.json (a step an output guard cut),
	// testdata/turn_tool_limits.json (a call past a tool limit),
	// testdata/turn_vocabulary.json (streamed: reasoning,
	// argument deltas, a step boundary, an approved call, read by
	// Workflow Streams subscribers), testdata/turn_custom_events.json (a
	// tool's custom events), testdata/turn_model_fallback.json (steps
	// answered by a fallback model, whose step_finish names it),
	// testdata/turn_output_repair.json (an answer's step, and the step
	// that repairs it), testdata/turn_model_override.json (steps on the
	// model the request named), testdata/turn_reasoning_blocks.json (an
	// Anthropic model's signed thinking, and the result's reasoning and
	// text blocks told as content events), testdata/turn_tool_image.json
	// (a tool's image, kept by ref, as the result's image block),
	// testdata/turn_live_first_canceled.json (a call streamed live first,
	// sealed when the turn stopped), testdata/turn_stopped_partial.json
	// (the same, keeping its partial answer), testdata/turn_steered.json
	// (a message taken in while it ran),
	// testdata/turn_stopped_at_boundary.json (a step whose tool calls did
	// not run), testdata/turn_streamed_local.json and
	// testdata/turn_tool_local.json (an agent's model calls as local
	// activities, agent.ModelLocal: the whole turn one workflow task),
	// testdata/turn_approval_grant.json (a call decided by a grant).
	vocabularyChange = "event-vocabulary"

	// conversationStreamsChange: a Conversation keeps an event log — each
	// message's message_start, its turn's events (the Conversation is the
	// turn's notify workflow, and the turn forwards its own events:
	// conversationTurnEventsChange), its answer on the text topic and its
	// message_end — and answers Workflow Streams' poll update and offset
	// query over it; before it continues as new it refuses new polls,
	// answers those waiting, and hands its last items on
	// (agent.ConversationCarry.Stream), so that offsets and indices go on
	// in the next run; and it keeps room in its history for a turn as
	// large as the largest of the run so far. The marker is the first
	// command of each run. Runs before it kept no log, refused the poll,
	// started turns without notify and kept a fixed room.
	//
	// Recorded: testdata/conversation_workflow_streams.json,
	// testdata/conversation_interrupted.json (a message that interrupts
	// the running turn, SendMessage.OnBusy),
	// testdata/conversation_steered.json (one added to the running turn),
	// testdata/conversation_memory.json (summaries between turns),
	// testdata/conversation_agent_on_busy.json (the agent's on_busy).
	conversationStreamsChange = "conversation-streams"

	// conversationTurnEventsChange: a turn whose request asks it
	// (ForwardEvents), with its notify workflow its parent — a
	// Conversation's turn, since conversationStreamsChange — forwards that
	// workflow its own tool and approval events, as a delegated turn does
	// its parent (eventlog.Forwarder). The marker is the turn's first
	// command. Runs before it forwarded to delegating turns only.
	//
	// Recorded: testdata/conversation_turn_events.json,
	// testdata/turn_steered.json (a conversation's turn that took in a
	// message while it ran), testdata/turn_stopped_at_boundary.json (one
	// that a message stopped).
	conversationTurnEventsChange = "conversation-turn-events"

	// fallbackChange: a model call that fails for good with an error type
	// the agent falls back on (agent.Agent.FallbackOn) is followed by a
	// CallModel of the agent's next fallback model for the same step, and
	// the model that answered takes the turn's later steps. The marker is
	// written when a run first falls back. Runs before it had no fallback
	// models, and failed.
	//
	// Recorded: testdata/turn_model_fallback.json.
	fallbackChange = "fallback-models"

	// structuredOutputChange: a final answer that does not match the
	// turn's output schema (CallModelResult.OutputProblems) is followed by
	// one more CallModel, which stores what was wrong as a step and asks
	// the model again; an answer that still does not match fails the turn
	// InvalidOutput. The marker is written when a run first gets an answer
	// that does not match. Runs before it had no output schemas, and took
	// any answer as it was.
	//
	// Recorded: testdata/turn_output_repair.json.
	structuredOutputChange = "structured-output"

	// modelOverrideChange: a turn whose request names a model
	// (agent.TurnRequest.Model) other than its agent's calls that model
	// at every step (LoadAgent refuses one the agent does not allow,
	// agent.Agent.ModelsAllowed). The marker is written once the agent is
	// loaded, only when the request names another model. Runs before it
	// called the agent's model whatever the request named.
	//
	// Recorded: testdata/turn_model_override.json.
	modelOverrideChange = "model-override"

	// jobEnvelopeChange: a request whose job envelope is malformed
	// (agent.TurnRequest.ValidateEnvelope: model, workflow_owner, user_id,
	// retry_count, created_at, context.workflow_state) is rejected. Runs
	// before it did not read those fields, and ran the turn.
	//
	// Recorded: none; the marker is written only for a malformed
	// envelope. TestAgentTurnFailures ("malformed envelope") runs the new
	// way.
	jobEnvelopeChange = "job-envelope"

	// liveFirstChange: a streamed model call that fails for good (or is
	// stopped) after streaming live first (contract.CallModelInput.LiveFirst)
	// has what it showed followers sealed into the log by a SealStream
	// local activity, before anything else is logged. Runs before it
	// signalled every batch, and had nothing to seal.
	//
	// Recorded: testdata/turn_live_first_canceled.json,
	// testdata/turn_stopped_partial.json,
	// testdata/turn_guardrail_tripped.json (a call an output guard cut).
	liveFirstChange = "live-first-streaming"

	// askUserChange: an ask_user call (agent.KindAskUser) is held by the
	// turn until a person answers it, its deadline passes or the turn is
	// cancelled (question.go), and what came of it is stored as its
	// result. The marker is written when a run first starts such a call.
	// Runs before it sent the call to the tool runtime, which refused it.
	//
	// Recorded: testdata/turn_ask_user.json.
	askUserChange = "ask-user"

	// agentOnBusyChange: a Conversation whose input sets no on_busy reads
	// its agent's (agent.Agent.OnBusy, by the AgentOnBusy local activity)
	// once a run, before its first turn; messages that name no policy
	// follow it. The marker is written before the run's first turn. Runs
	// before it queued them.
	//
	// Recorded: testdata/conversation_agent_on_busy.json.
	agentOnBusyChange = "agent-on-busy"

	// toolLimitsChange: a tool call that would take a turn past its
	// agent's tool limits (agent.ToolLimits) is not run; the model reads
	// why. The marker is written at the first call of an agent that has
	// limits. Runs before it had no limits.
	//
	// Recorded: testdata/turn_tool_limits.json.
	toolLimitsChange = "tool-limits"

	// jobTakenChange: a message whose turn cannot start because its job
	// id's workflow has a run of another request (running, or closed
	// other than failed: the child's reuse policy no longer starts a run
	// over a completed one) is refused: its send_message update fails
	// with Conflict, the job id is forgotten and nothing is added to the
	// transcript. Runs before it accepted the message, started a second
	// run over a completed turn, and answered with the other request's
	// turn.
	//
	// Recorded: none; the marker is written only when a job id is taken.
	// TestSendMessageRefusesATakenJobID runs the new way.
	jobTakenChange = "job-taken"

	// approvalGrantsChange: a turn binds each decision to the call it
	// decides and remembers approvals. A call that waits has an approval
	// id (agent.ApprovalIDOf: the run, the call's step, its call id),
	// shown by pending_approvals and its approval_required event; a
	// decision that names another call's approval id is refused
	// (checkBound), and one that names none decides the call waiting now
	// with its call id (a call id reused by a later step is decided
	// anew). An approval whose scope is turn or session makes a grant
	// (agent.Grant, stored with its record), which decides at once the
	// round's other waiting calls it covers, and the later calls whose
	// need names it (contract.ApprovalNeed.Grant, found by CallModel):
	// those are recorded and logged as approved via grant, and do not
	// wait. The marker is written when a run's first call needs
	// approval. Runs before it decided calls by call id alone, ignored a
	// decision's scope, and made every such call wait.
	//
	// Recorded: testdata/turn_approval_grant.json (a call approved for
	// the rest of the turn, and the next step's call decided by the
	// grant).
	approvalGrantsChange = "approval-grants"
)
