-- A2A tasks are runs: a task's id is its first run's id, kept in every run of the task as
-- metadata.a2a_task_id (a resume copies the metadata). This index finds a task's runs.
create index runs_a2a_task on runs (tenant_id, assistant_id, (metadata->>'a2a_task_id'), created_at desc)
  where metadata ? 'a2a_task_id';
