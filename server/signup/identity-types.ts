/** GET /v0/identity-types: what one identity provides (SPEC 4.1). */
export const IDENTITY_TYPES = {
  identityTypes: [
    {
      type: 'default',
      description: 'One agent persona, created by an empty POST /v0/agent-signup or POST /v0/platform/identities',
      provides: [
        { capability: 'mail', description: 'An e-mail inbox that sends and receives; messages, threads, labels, threaded replies', scopes: ['mail:read', 'mail:send', 'mail:manage'] },
        { capability: 'vault', description: 'Encrypted credential vault (AES-256-GCM per credential) with TOTP codes; seeds are never returned', scopes: ['vault:read', 'vault:write'] },
        { capability: 'calendar', description: 'Events with date-range queries and an optional public iCal feed', scopes: ['calendar:read', 'calendar:write'] },
        { capability: 'payments', description: 'Pays x402-priced APIs from the identity wallet under mandate caps (payments_pay)', scopes: ['payments:read', 'payments:spend'] },
        { capability: 'wallet', description: 'A USDC smart-account wallet; the service signs, the agent never holds a private key', scopes: ['wallet:read'] },
        { capability: 'did', description: 'A did:web identity with an Ed25519 key to sign payloads and verify other agents', scopes: ['identity:read', 'identity:sign', 'identity:verify'] },
        {
          capability: 'chat', description: 'One team-chat workspace: send, reply in threads, list channels, poll inbound messages', scopes: ['chat:read', 'chat:send'],
          availability: 'admin_preview', note: 'Admin preview: enabled only for admin accounts (made by the operator); other orgs get 403 admin_preview',
        },
      ],
    },
  ],
};
