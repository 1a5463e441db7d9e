-- A job id names one request. A result keeps the hash of the request it
-- answers (agent.TurnRequest.Hash), so that a later request with the same
-- job id and another hash is refused instead of answered with it. ''
-- (results stored before the hash was kept): any request is accepted.
-- (A turn's claim, turns, keeps its whole request already.)
ALTER TABLE agent_results ADD COLUMN request_hash TEXT NOT NULL DEFAULT '';
