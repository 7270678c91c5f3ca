import { describe, expect, it } from "vitest";
import { createSession, requireRole } from "../../src/auth/session";
import { adminUser, viewerUser } from "./fixtures";

describe("createSession", () => {
  it("keeps the viewer role", () => {
    expect(createSession(viewerUser).role).toBe("viewer");
  });

  it("gives the admin fixture an admin session", () => {
    const session = createSession(adminUser);
    expect(() => requireRole(session, "admin")).not.toThrow();
    expect(session.role).toBe("admin");
  });
});
