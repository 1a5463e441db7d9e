package workflows

// The change ids of Conversation, the one workflow whose runs outlive a
// deploy (it is AutoUpgrade: register.go), each given to
// workflow.GetVersion where it does what it did not do before. A run
// that started before a change replays the old way (GetVersion returns
// workflow.DefaultVersion: its history has no marker for the id), a run
// since then records the marker the first time it reaches the gate and
// goes the new way. The names and values are in recorded histories, so
// neither ever changes; a change that is no longer needed keeps its gate
// until no run from before it can be replayed.
//
// AgentTurn and Evaluation are Pinned and have no gates: doc.go says why,
// and what a change to them needs instead.
//
// Each id says what it changed, and which recorded history in testdata/
// replays its new way ("Recorded:"). A gate reached only on a rare path
// names the workflow tests that run the new way instead. TestChangeIDs
// holds this list to the code and to the histories.
//
// Adding one: declare it here, with what it changes; gate the new
// behaviour with workflow.GetVersion(ctx, id, workflow.DefaultVersion, 1)
// and keep the old behaviour on the DefaultVersion branch; record a
// history that takes the new way (the end-to-end tests record with
// AGENTFLOW_RECORD_HISTORIES=1) and name it here.
const (
	// memoryChange: a Conversation that loads its history has its
	// session's older messages folded into a summary (contract.Summarize)
	// every summarizeEvery turns, once they outgrow the agent's memory
	// window. Runs before it ran no Summarize.
	//
	// Recorded: testdata/conversation_memory.json.
	memoryChange = "conversation-memory"

	// conversationStreamsChange: a Conversation keeps an event log — each
	// message's message_start, its turn's events (the Conversation is the
	// turn's notify workflow, and the turn forwards its own events), its
	// answer on the text topic and its message_end — and answers Workflow Streams' poll update and offset
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
	// testdata/conversation_agent_on_busy.json (the agent's on_busy),
	// testdata/conversation_memory_extract.json (long-term memory).
	conversationStreamsChange = "conversation-streams"

	// agentOnBusyChange: a Conversation whose input sets no on_busy reads
	// its agent's (agent.Agent.OnBusy, by the AgentOnBusy local activity)
	// once a run, before its first turn; messages that name no policy
	// follow it. The marker is written before the run's first turn. Runs
	// before it queued them.
	//
	// Recorded: testdata/conversation_agent_on_busy.json,
	// testdata/conversation_memory_extract.json.
	agentOnBusyChange = "agent-on-busy"

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

	// memoryExtractChange: a Conversation that has answered turns of an
	// authenticated caller since its last extraction waits for its next
	// message memoryIdleAfter at most, then starts MemoryExtract (a child
	// it does not wait for, id contract.MemoryExtractWorkflowID) and
	// waits on. The marker is written when such a wait begins. Runs
	// before it waited without a timer and extracted nothing. How long
	// it waits is its input's (agent.ConversationInput.MemoryIdleSec):
	// a timer's duration is not part of what replay matches.
	//
	// Recorded: testdata/conversation_memory_extract.json (two turns of
	// an authenticated caller, the quiet timer, the child's start), and
	// the child's own run, memory_extract.json beside it; the end-to-end
	// test TestMemoryExtractedWhenIdle records both.
	memoryExtractChange = "memory-extract"
)
