import { Type, type Static } from "typebox";
import { JsonObject, Pagination, Timestamp, Uuid } from "./common.ts";

/** Why the latest due time of a schedule created no run (its assistant or thread disappeared). */
export const ScheduleError = Type.Object({
  code: Type.String({ description: "the problem code the run's creation was refused with, e.g. validation_error or not_found" }),
  message: Type.String(),
  scheduled_at: Timestamp,
});
export type ScheduleError = Static<typeof ScheduleError>;

/** A cron definition that creates runs (DESIGN.md "Schedules"). */
export const Schedule = Type.Object(
  {
    schedule_id: Uuid,
    assistant_id: Type.String(),
    cron: Type.String(),
    timezone: Type.String(),
    input: JsonObject,
    enabled: Type.Boolean(),
    metadata: JsonObject,
    thread_id: Type.Union([Uuid, Type.Null()]),
    next_run_at: Type.Union([Timestamp, Type.Null()], { description: "the next due time; null while disabled" }),
    last_run_at: Type.Union([Timestamp, Type.Null()], { description: "the due time that fired last (the run's metadata.scheduled_at)" }),
    last_run_id: Type.Union([Uuid, Type.Null()]),
    last_error: Type.Union([ScheduleError, Type.Null()], {
      description: "set when the latest due time could not create a run; cleared by the next run",
    }),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { $id: "Schedule" },
);
export type Schedule = Static<typeof Schedule>;

const Cron = Type.String({
  minLength: 1,
  maxLength: 200,
  description: "5 fields (minute hour day-of-month month day-of-week), or 6 with leading seconds",
});
const Timezone = (options: { default?: string } = {}) =>
  Type.String({ minLength: 1, maxLength: 100, description: "IANA time zone name, e.g. Europe/Paris", ...options });

export const CreateScheduleBody = Type.Object(
  {
    assistant_id: Type.String({ minLength: 1 }),
    cron: Cron,
    timezone: Type.Optional(Timezone({ default: "UTC" })),
    input: Type.Optional(JsonObject),
    enabled: Type.Optional(Type.Boolean({ default: true })),
    metadata: Type.Optional(JsonObject),
    thread_id: Type.Optional(
      Type.Union([Uuid, Type.Null()], { description: "runs go to this thread (enqueued); absent or null: stateless runs" }),
    ),
  },
  { additionalProperties: false },
);
export type CreateScheduleBody = Static<typeof CreateScheduleBody>;

/** Any of these; a change of cron, timezone or enabled recomputes next_run_at. */
export const PatchScheduleBody = Type.Object(
  {
    cron: Type.Optional(Cron),
    timezone: Type.Optional(Timezone()),
    input: Type.Optional(JsonObject),
    enabled: Type.Optional(Type.Boolean()),
    metadata: Type.Optional(JsonObject),
  },
  { additionalProperties: false },
);
export type PatchScheduleBody = Static<typeof PatchScheduleBody>;

export const ScheduleIdParams = Type.Object({ schedule_id: Uuid }, { additionalProperties: false });
export type ScheduleIdParams = Static<typeof ScheduleIdParams>;

export const ListSchedulesQuery = Type.Object({ ...Pagination }, { additionalProperties: false });
export type ListSchedulesQuery = Static<typeof ListSchedulesQuery>;
