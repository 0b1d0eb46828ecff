-- Tenant-leading keys (DESIGN.md "Beyond one PostgreSQL"): every tenant's table carries tenant_id,
-- and it leads every primary key, unique constraint and foreign key, so that the schema can be
-- distributed by tenant_id (Citus) with every table co-located. Thread ids become unique per
-- tenant, not globally: the same id in two tenants is two threads.
--
-- Revision 11 is another change's; the migrator applies every shipped revision the ledger lacks,
-- lower ones included, so this one and 11 commute (docs/database.md, "Migrations").

-- 1. tenant_id where it was implied: an event by its run; a checkpoint and its writes by the
--    thread they belong to, or by the stateless run whose id names them. A checkpoint neither
--    owns (written by a saver used on its own, outside Rudder's runs) goes to tenant '', the
--    tenant of such a saver (storage/checkpointer.ts).
alter table run_events add column tenant_id text;
update run_events e set tenant_id = r.tenant_id from runs r where r.run_id = e.run_id;
alter table run_events alter column tenant_id set not null;

alter table checkpoints add column tenant_id text;
update checkpoints c set tenant_id = t.tenant_id from threads t where c.thread_id = t.thread_id::text;
update checkpoints c set tenant_id = r.tenant_id from runs r where c.tenant_id is null and c.thread_id = r.run_id::text;
update checkpoints set tenant_id = '' where tenant_id is null;
alter table checkpoints alter column tenant_id set not null;

alter table checkpoint_writes add column tenant_id text;
update checkpoint_writes w set tenant_id = t.tenant_id from threads t where w.thread_id = t.thread_id::text;
update checkpoint_writes w set tenant_id = r.tenant_id from runs r where w.tenant_id is null and w.thread_id = r.run_id::text;
update checkpoint_writes set tenant_id = '' where tenant_id is null;
alter table checkpoint_writes alter column tenant_id set not null;

-- 2. Keys. The foreign keys go first (they depend on the primary keys they reference).
alter table run_events drop constraint run_events_run_id_fkey;
alter table steering_events drop constraint steering_events_run_id_fkey;
alter table runs drop constraint runs_thread_id_fkey;

alter table threads drop constraint threads_pkey, add primary key (tenant_id, thread_id);
alter table runs drop constraint runs_pkey, add primary key (tenant_id, run_id);
alter table run_events drop constraint run_events_pkey, add primary key (tenant_id, run_id, sequence);
alter table steering_events drop constraint steering_events_pkey, add primary key (tenant_id, id);
alter table steering_events drop constraint steering_events_run_id_sequence_key, add unique (tenant_id, run_id, sequence);
alter table checkpoints drop constraint checkpoints_pkey, add primary key (tenant_id, thread_id, checkpoint_ns, checkpoint_id);
alter table checkpoint_writes drop constraint checkpoint_writes_pkey,
  add primary key (tenant_id, thread_id, checkpoint_ns, checkpoint_id, task_id, idx);

-- A stateless run (thread_id null) references no thread: MATCH SIMPLE skips a key with a null part.
alter table runs add constraint runs_thread_fkey
  foreign key (tenant_id, thread_id) references threads (tenant_id, thread_id) on delete cascade;
alter table run_events add constraint run_events_run_fkey
  foreign key (tenant_id, run_id) references runs (tenant_id, run_id) on delete cascade;
alter table steering_events add constraint steering_events_run_fkey
  foreign key (tenant_id, run_id) references runs (tenant_id, run_id) on delete cascade;

-- 3. Indexes on a thread or run id alone now lead with the tenant too. The claim's and the sweeps'
--    indexes (runs_claimable, runs_lease_expiry, schedules_due, store_items_expiry) stay global:
--    those scans cross tenants on one PostgreSQL (docs/architecture.md, "Distributing by tenant").
drop index runs_one_active_per_thread;
create unique index runs_one_active_per_thread on runs (tenant_id, thread_id) where status in ('running', 'cancelling');
drop index runs_thread_created;
create index runs_thread_created on runs (tenant_id, thread_id, created_at desc);
drop index steering_events_open;
create index steering_events_open on steering_events (tenant_id, run_id, sequence) where status in ('pending', 'delivered');
drop index steering_events_unsettled;
create index steering_events_unsettled on steering_events (tenant_id, replay_run_id, consumed_task_id)
  where status = 'consumed' and settled_at is null;
