-- A stateless run has no thread, yet every one of them had entries in the two indexes keyed by
-- thread: `runs_thread_created` (all under (tenant_id, null)) and, while it runs,
-- `runs_one_active_per_thread`. Nothing looks a stateless run up by thread (every query on these
-- indexes names a thread, which implies it is not null), so they leave them out: a stateless run
-- costs two index insertions fewer at its create and at each non-HOT update (claim, gate, settle).
-- On PGlite at client concurrency 50 that was 12-26 % more trivial runs per second
-- (docs/benchmarks.md, "Issue 22, twelfth pass").

drop index runs_thread_created;
create index runs_thread_created on runs (tenant_id, thread_id, created_at desc) where thread_id is not null;

drop index runs_one_active_per_thread;
create unique index runs_one_active_per_thread on runs (tenant_id, thread_id)
  where status in ('running', 'cancelling') and thread_id is not null;
