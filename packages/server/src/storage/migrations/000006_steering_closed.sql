-- Steering admission gate: closed by the worker before its final flush, reset on each claim.
-- False for every existing run.
alter table runs add column steering_closed boolean not null default false;
