-- Runs (the runs table is the queue) and their append-only event log.

create table runs (
  run_id              uuid primary key,
  tenant_id           text not null,
  thread_id           uuid references threads (thread_id) on delete cascade,
  assistant_id        text not null,
  graph_id            text not null,
  status              text not null default 'pending',
  input               jsonb,
  command             jsonb,
  context             jsonb not null default '{}',
  config              jsonb not null default '{}',
  metadata            jsonb not null default '{}',
  output              jsonb,
  error               jsonb,
  multitask_strategy  text not null default 'enqueue',
  durability          text not null default 'sync',
  run_timeout         double precision,
  max_model_calls     double precision,
  max_tool_calls      double precision,
  max_tokens          double precision,
  max_cost            double precision,
  usage               jsonb not null default '{"model_calls":0,"tool_calls":0,"tokens":0,"cost":0}',
  idempotency_key     text,
  request_hash        text,
  -- Delivery: attempt is the fencing token of every write a worker makes under its lease.
  attempt             integer not null default 0,
  lease_owner         text,
  lease_expires_at    timestamptz,
  available_at        timestamptz not null default now(),
  last_event_sequence integer not null default 0,
  created_at          timestamptz not null default now(),
  started_at          timestamptz,
  finished_at         timestamptz,
  updated_at          timestamptz not null default now()
);

create unique index runs_idempotency_key on runs (tenant_id, idempotency_key) where idempotency_key is not null;
-- At most one run per thread executes at a time: a second claim fails instead of running twice.
create unique index runs_one_active_per_thread on runs (thread_id) where status in ('running', 'cancelling');
create index runs_claimable on runs (created_at) where status = 'pending';
create index runs_thread_created on runs (thread_id, created_at desc);
create index runs_tenant_pending on runs (tenant_id) where status = 'pending';
create index runs_lease_expiry on runs (lease_expires_at) where status in ('running', 'cancelling');

create table run_events (
  run_id     uuid not null references runs (run_id) on delete cascade,
  sequence   integer not null,
  kind       text not null,
  data       jsonb not null,
  created_at timestamptz not null default now(),
  primary key (run_id, sequence)
);
