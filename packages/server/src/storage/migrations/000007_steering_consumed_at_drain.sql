-- Steering consumption commits at the drain; what a task consumed is handed again to that task's
-- next execution until the task's writes are checkpointed (docs/steering.md). Additive: the old
-- delivered_* columns stay for rows an older binary wrote.
alter table steering_events
  -- The task that consumed the row, where it ran, and the checkpoint it was prepared from: while
  -- that checkpoint is stored the task can run again; when it is not, it never will.
  add column consumed_task_id text,
  add column consumed_node text,
  add column consumed_ns text,
  add column consumed_step integer,
  add column consumed_checkpoint_id text,
  -- The attempt that took the row last, and a token of that attempt's execution (unique, unlike
  -- attempt numbers, which a redrive starts over).
  add column consumed_attempt integer,
  add column taken_by text,
  -- The run whose re-execution of the task gets the row again: the consuming run, moved to its
  -- successor by a resume. Null for rows consumed before this revision (never handed out again).
  add column replay_run_id uuid,
  -- When the task's writes were checkpointed: from then on the row is never handed out again.
  add column settled_at timestamptz;
create index steering_events_unsettled on steering_events (replay_run_id, consumed_task_id) where status = 'consumed' and settled_at is null;
