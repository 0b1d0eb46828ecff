-- A run may ask not to start before a time (LangGraph's `after_seconds`): it is created pending
-- and no worker claims it until then. The claim waits for `available_at` (also a retry's
-- backoff), which a delayed run starts at; `not_before` keeps what the run asked for, since
-- `available_at` moves with each retry. Null: at once.

alter table runs add column not_before timestamptz;
