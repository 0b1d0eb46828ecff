-- Schedules: cron definitions that create runs. The executor claims due rows
-- (`next_run_at <= now()`, `for update skip locked`) and advances them in the transaction that
-- creates the run, so each due time fires exactly once however many executors run.

create table schedules (
  tenant_id    text not null,
  schedule_id  uuid not null,
  assistant_id text not null,
  -- Absent: the schedule creates stateless runs. No foreign key: a thread's deletion must not
  -- wait on a schedule row an executor holds (that executor waits on the thread: a deadlock);
  -- a schedule whose thread is gone records the refusal in last_error at each due time.
  thread_id    uuid,
  cron         text not null,
  timezone     text not null default 'UTC',
  input        jsonb not null default '{}',
  metadata     jsonb not null default '{}',
  enabled      boolean not null default true,
  -- Null while disabled (or when the cron never fires again).
  next_run_at  timestamptz,
  last_run_at  timestamptz,
  last_run_id  uuid,
  -- Why the last due time created no run (an assistant or thread that disappeared), else null.
  last_error   jsonb,
  created_at   timestamptz not null default now(),
  updated_at   timestamptz not null default now(),
  primary key (tenant_id, schedule_id)
);
create index schedules_tenant_created on schedules (tenant_id, created_at desc, schedule_id desc);
-- The executor's scan: enabled schedules by due time.
create index schedules_due on schedules (next_run_at) where enabled and next_run_at is not null;

-- GET /v1/runs: a tenant's runs, newest first (filters by status, assistant, thread and metadata
-- containment apply to this order; a schedule's runs are found by metadata.schedule_id).
create index runs_tenant_created on runs (tenant_id, created_at desc, run_id desc);
