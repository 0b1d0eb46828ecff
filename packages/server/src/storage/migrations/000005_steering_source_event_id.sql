-- The root id of a steering event across resume migrations (null until a row is moved).
alter table steering_events add column source_event_id uuid;
