-- Foundation: tenants' threads and assistants, and the LangGraph checkpoints behind threads.

create table threads (
  thread_id   uuid primary key,
  tenant_id   text not null,
  metadata    jsonb not null default '{}',
  status      text not null default 'idle',
  created_at  timestamptz not null default now(),
  updated_at  timestamptz not null default now()
);
create index threads_tenant_created on threads (tenant_id, created_at desc, thread_id desc);
create index threads_metadata on threads using gin (metadata jsonb_path_ops);

create table assistants (
  tenant_id    text not null,
  assistant_id text not null,
  graph_id     text not null,
  name         text not null,
  description  text,
  config       jsonb not null default '{}',
  context      jsonb not null default '{}',
  metadata     jsonb not null default '{}',
  created_at   timestamptz not null default now(),
  updated_at   timestamptz not null default now(),
  primary key (tenant_id, assistant_id)
);
create index assistants_tenant_created on assistants (tenant_id, created_at desc);

-- One row per LangGraph checkpoint. The serialised checkpoint is kept whole (one write per
-- checkpoint); metadata is jsonb so history can be filtered by containment.
create table checkpoints (
  thread_id            text not null,
  checkpoint_ns        text not null default '',
  checkpoint_id        text not null,
  parent_checkpoint_id text,
  checkpoint_type      text not null,
  checkpoint           bytea not null,
  metadata             jsonb not null default '{}',
  created_at           timestamptz not null default now(),
  primary key (thread_id, checkpoint_ns, checkpoint_id)
);

-- Pending writes of the tasks of a checkpoint (LangGraph's putWrites).
create table checkpoint_writes (
  thread_id     text not null,
  checkpoint_ns text not null default '',
  checkpoint_id text not null,
  task_id       text not null,
  idx           integer not null,
  channel       text not null,
  value_type    text not null,
  value         bytea not null,
  task_path     text not null default '',
  primary key (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
);
