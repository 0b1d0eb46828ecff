/**
 * Records sorted by one of their fields (strings, numbers, booleans; ISO timestamps sort as
 * strings), ties broken by `tieBreaker` in the same direction: a search's `sort_by` and
 * `sort_order` over a page assembled in memory, in the order SQL's `order by` would give.
 */
export function sortedBy<T extends object, K extends keyof T & string>(
  records: readonly T[],
  sort: { by: K; order: "asc" | "desc" },
  tieBreaker: keyof T & string,
): T[] {
  const direction = sort.order === "asc" ? 1 : -1;
  const compare = (a: unknown, b: unknown): number => {
    if (a === b) return 0;
    if (typeof a === "number" && typeof b === "number") return a - b;
    return String(a) < String(b) ? -1 : 1;
  };
  return [...records].sort((a, b) => direction * (compare(a[sort.by], b[sort.by]) || compare(a[tieBreaker], b[tieBreaker])));
}
