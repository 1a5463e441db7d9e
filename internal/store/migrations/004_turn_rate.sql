-- Counting an agent's recent turns (its turns_per_minute limit).
CREATE INDEX turns_agent_recent_idx ON turns (tenant_id, agent_id, created_at);
