-- Steering: structured input injected into a live run, stored durably, delivered in order.
create table steering_events (
  id              uuid primary key,
  tenant_id       text not null,
  run_id          uuid not null references runs (run_id) on delete cascade,
  sequence        integer not null,
  kind            text not null,
  payload         jsonb not null,
  metadata        jsonb not null default '{}',
  idempotency_key text,
  status          text not null default 'pending',
  created_at      timestamptz not null default now(),
  -- A drain hands rows to a task as 'delivered'; they become 'consumed' in the transaction that
  -- checkpoints that task's result, so a crash in between redelivers instead of losing them.
  delivered_attempt integer,
  delivered_task_id text,
  delivered_node    text,
  delivered_ns      text,
  consumed_at     timestamptz,
  unique (run_id, sequence)
);
create unique index steering_events_idempotency on steering_events (tenant_id, run_id, idempotency_key) where idempotency_key is not null;
create index steering_events_open on steering_events (run_id, sequence) where status in ('pending', 'delivered');

-- The run's steering sequence: a counter separate from its event sequence.
alter table runs add column last_steering_sequence integer not null default 0;
