-- The claim's scan sees only runs it may claim (issue 22 item 6). A pending run queued behind
-- its thread's active run, or behind another pending run of the thread, is `blocked`; the
-- statement that frees the thread (a settle, a cancel, the reaper) unblocks the thread's next
-- run in the same transaction (docs/runs.md, "Who releases a thread's next run"). The claim reads
-- the pending runs that are not blocked from `runs_claimable`, so runs waiting behind busy
-- threads cost it nothing. A stateless run is never blocked.

alter table runs add column blocked boolean not null default false;

-- Existing pending runs: blocked exactly when the claim's rule so far would have passed them over
-- for their thread (an active run, or an older pending run, on it).
update runs r set blocked = true
 where r.status = 'pending' and r.thread_id is not null
   and (exists (select 1 from runs a where a.tenant_id = r.tenant_id and a.thread_id = r.thread_id
                                       and a.status in ('running', 'cancelling'))
        or exists (select 1 from runs p where p.tenant_id = r.tenant_id and p.thread_id = r.thread_id and p.status = 'pending'
                                          and (p.created_at, p.run_id) < (r.created_at, r.run_id)));

drop index runs_claimable;
create index runs_claimable on runs (created_at, run_id) where status = 'pending' and not blocked;
