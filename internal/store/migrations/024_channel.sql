-- The door a turn came through (agent.TurnRequest.Channel: grpc, http,
-- sse, websocket, openai, aisdk, mcp, a2a, agui, temporal, schedule,
-- process, delegate, eval), kept with its result and with each model call
-- the usage ledger counts, so that usage and audits split by it. '':
-- stored before channels were kept, or a call that is no turn's (a
-- conversation's summary).
ALTER TABLE usage_ledger ADD COLUMN channel TEXT NOT NULL DEFAULT '';
ALTER TABLE agent_results ADD COLUMN channel TEXT NOT NULL DEFAULT '';
