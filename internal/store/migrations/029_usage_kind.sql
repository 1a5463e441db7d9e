-- What a model call the usage ledger counts was for (store.Kind*): chat
-- (a turn's step, a guard's judge, a session's summary), prepare (a
-- turn's prepare phase asking its model: classify, reformulate), memory
-- (extracting a user's memories from a conversation) or embedding (the
-- knowledge features' embeddings: ingest, search, retrieve, remember,
-- recall), so that usage splits by it (GetUsage's group_by "kind").
ALTER TABLE usage_ledger ADD COLUMN kind TEXT NOT NULL DEFAULT 'chat';
