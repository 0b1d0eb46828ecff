-- An event is appended only by a statement that updates its run's row in the same statement (the
-- row's counter hands out its sequence, under the row's lock), so it cannot name a run that does
-- not exist; the foreign key checked that again for every event, one trigger query per row. At
-- token rate that check was two thirds of a flush's time in PostgreSQL (200 runs x 2 events: 38 ->
-- 14 ms p50; emit -> SSE p50 91 -> 42 ms, docs/benchmarks.md, "Issue 22, fifteenth pass").
-- What the key's cascade did, deleting a thread (and so its runs) now does itself: it deletes its
-- runs' events first (storage/threads.ts, deleteThread), as it already deleted its checkpoints.
alter table run_events drop constraint run_events_run_fkey;
