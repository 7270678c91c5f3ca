import { createUserMock } from "../../src/auth/session";

// Users shared by the auth suites.
export const viewerUser = createUserMock({ id: "u-viewer", name: "Vera", role: "viewer" });

export const adminUser = createUserMock({ id: "u-admin", name: "Ada" });
