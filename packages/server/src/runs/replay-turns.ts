/**
 * Turns for the streams of one tenant that read a run's log themselves, behind the process's
 * shared tail of the run (a replay from `Last-Event-ID: 0`, a reader far behind). Such a reader
 * reads and sends a page of events per turn as fast as the database answers, so two hundred of
 * them from one tenant held the API's event loop for everyone: another tenant's create and
 * stream took 20–45 s (docs/events.md). A tenant's replays take turns, a few at a time, each
 * turn held while its page is read and sent; other tenants' requests wait for at most those.
 */
export class ReplayTurns {
  private readonly tenants = new Map<string, { running: number; waiting: (() => void)[] }>();

  constructor(private readonly perTenant: number) {}

  /** Waits for a turn of the tenant's; call the returned function once the page is sent. */
  async take(tenantId: string): Promise<() => void> {
    let turns = this.tenants.get(tenantId);
    if (!turns) this.tenants.set(tenantId, (turns = { running: 0, waiting: [] }));
    const held = turns;
    if (held.running < this.perTenant) held.running++;
    else await new Promise<void>((resolve) => held.waiting.push(resolve)); // handed over by a release, still counted
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = held.waiting.shift();
      if (next) next();
      else if (--held.running === 0) this.tenants.delete(tenantId);
    };
  }
}
