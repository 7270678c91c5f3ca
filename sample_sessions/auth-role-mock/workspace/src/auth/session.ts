import type { Role } from "./roles";

export interface User {
  id: string;
  name: string;
  role?: Role;
}

export interface Session {
  userId: string;
  role: Role | undefined;
  issuedAt: number;
}

// Test helper shared by the auth suites. It copies what it is given and sets no role
// default: a test that needs a role must say which one.
export function createUserMock(overrides: Partial<User> = {}): User {
  return {
    id: overrides.id ?? "user-1",
    name: overrides.name ?? "Test User",
    ...overrides,
  };
}

export function createSession(user: User, now: number = Date.now()): Session {
  return { userId: user.id, role: user.role, issuedAt: now };
}

export function requireRole(session: Session, role: Role): void {
  if (session.role !== role) {
    throw new Error(`expected role ${role} received ${session.role}`);
  }
}
