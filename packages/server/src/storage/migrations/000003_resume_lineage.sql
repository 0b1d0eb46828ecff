-- Resume lineage: the typed, system-written link from a resumed (paused) run to the run that
-- continues it. Null for every other run, including existing ones; a user metadata key of the
-- same name never counts (spec section 9, rule 8).
alter table runs add column superseded_by_run_id uuid;
