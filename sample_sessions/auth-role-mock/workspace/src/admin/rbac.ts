import type { Role } from "../auth/roles";

// Permission matrix of the admin console (a separate module from auth sessions).
export const PERMISSIONS: Record<Role, readonly string[]> = {
  admin: ["billing", "audit", "users"],
  editor: ["content"],
  viewer: [],
};

export function canAccess(role: Role | undefined, page: string): boolean {
  return role !== undefined && PERMISSIONS[role].includes(page);
}
