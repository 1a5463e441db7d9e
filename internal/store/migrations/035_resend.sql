-- A call whose outcome was unknown may be sent again when a person
-- approves it (the tool asks for approval): that second delivery is at
-- most once too, with an intent of its own. resend is the approval id of
-- the decision that let it past the first intent; '' for the call as the
-- model made it.
ALTER TABLE tool_effects ADD COLUMN resend TEXT NOT NULL DEFAULT '';
ALTER TABLE tool_effects DROP CONSTRAINT tool_effects_pkey,
    ADD PRIMARY KEY (tenant_id, job_id, seq, resend);

-- approvals.resend marks the decision whether to send such a call again.
ALTER TABLE approvals ADD COLUMN resend BOOLEAN NOT NULL DEFAULT false;
