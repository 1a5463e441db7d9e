-- The worker build that stored a turn's result (its Worker Deployment
-- Version, "deployment:build"; '' for an unversioned worker): a rollout
-- compares the turns of the build it ramps with those of the current one.
ALTER TABLE agent_results ADD COLUMN build_id TEXT NOT NULL DEFAULT '';
CREATE INDEX agent_results_build_idx ON agent_results (build_id, created_at) WHERE build_id <> '';
