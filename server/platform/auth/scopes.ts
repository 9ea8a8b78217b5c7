/** Every scope an identity key can hold (SPEC 5, plus the areas SPEC lists as "the list is longer"). */
export const ALL_SCOPES = [
  'mail:read', 'mail:send', 'mail:manage',
  'vault:read', 'vault:write',
  'calendar:read', 'calendar:write',
  'payments:read', 'payments:spend',
  'wallet:read',
  'chat:read', 'chat:send',
  'identity:read', 'identity:sign', 'identity:verify',
  'logs:read',
] as const;

export type Scope = (typeof ALL_SCOPES)[number];

/** A new identity gets every scope; the org admin narrows it with PATCH /v0/platform/identities/{id}. */
export const DEFAULT_IDENTITY_SCOPES: readonly Scope[] = ALL_SCOPES;

export const isScope = (value: string): value is Scope => (ALL_SCOPES as readonly string[]).includes(value);
