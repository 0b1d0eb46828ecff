import { resolveConfig } from "../config/config.ts";
import { openDatabase } from "../server.ts";
import { MigrationError, migrate, migrationStatus } from "../storage/migrate.ts";
import type { CliValues } from "./options.ts";

export async function runMigrate(values: CliValues): Promise<number> {
  const config = resolveConfig({ dataDir: values["data-dir"], config: values.config });
  const to = values.to === undefined ? undefined : Number(values.to);
  if (to !== undefined && !(Number.isInteger(to) && to >= 0))
    throw new MigrationError(`--to must be a revision number, not "${values.to}"`);
  const db = await openDatabase(config);
  try {
    if (values.status) {
      const status = await migrationStatus(db);
      const lines = [
        `database revision: ${status.current} (this binary's latest: ${status.latest})`,
        ...status.applied.map((m) => `  applied  ${pad(m.id)} ${m.name}  ${m.applied_at}`),
        ...status.pending.map((m) => `  pending  ${pad(m.id)} ${m.name}`),
      ];
      process.stdout.write(`${lines.join("\n")}\n`);
      return 0;
    }
    const applied = await migrate(db, { to });
    const status = await migrationStatus(db);
    process.stdout.write(
      applied.length
        ? `applied ${applied.map(pad).join(", ")}; database revision is now ${status.current}\n`
        : `nothing to apply; database revision is ${status.current}\n`,
    );
    return 0;
  } finally {
    await db.close();
  }
}

const pad = (id: number) => String(id).padStart(6, "0");
