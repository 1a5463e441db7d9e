-- Reserved: migration 27 is the audit log's, which lands on another
-- branch; this empty step keeps the sequence whole until it does.
SELECT 1;
