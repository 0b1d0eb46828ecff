/**
 * Roles and what they may do (DESIGN.md "Roles"). Roles are cumulative: a permission is granted
 * when any of the caller's roles grants it.
 */
export const ROLES = ["viewer", "operator", "developer", "admin"] as const;
export type Role = (typeof ROLES)[number];

/** read: every resource of the tenant; operate: threads, runs, store, schedules, gateways; develop: assistants. */
export type Permission = "read" | "operate" | "develop";

const GRANTS: Record<Role, readonly Permission[]> = {
  viewer: ["read"],
  operator: ["read", "operate"],
  developer: ["read", "develop"],
  admin: ["read", "operate", "develop"],
};

export function isRole(value: string): value is Role {
  return (ROLES as readonly string[]).includes(value);
}

export function grants(roles: readonly Role[], permission: Permission): boolean {
  return roles.some((role) => GRANTS[role].includes(permission));
}
