import { z } from 'zod';
import { findNetwork, findSolanaNetwork, NETWORKS, SOLANA_ADDRESS, SOLANA_NETWORKS } from 'agentgate-x402-wire';
import { parseAddressRanges } from './ssrf.js';

/** How the server treats loopback and test-only features: `dev` allows loopback targets and the faucet. */
export type Mode = 'dev' | 'production';

const bool = z.enum(['true', 'false', '1', '0', 'yes', 'no']).transform((v) => ['true', '1', 'yes'].includes(v));
const port = z.coerce.number().int().min(0).max(65535);
const masterKey = z.string().transform((value, ctx) => {
  const bytes = /^[0-9a-fA-F]{64}$/.test(value) ? Buffer.from(value, 'hex') : Buffer.from(value, 'base64');
  if (bytes.length !== 32) {
    ctx.addIssue({ code: 'custom', message: 'must be 32 bytes, as 64 hex characters or base64' });
    return z.NEVER;
  }
  return bytes;
});
const domain = z.string().regex(/^[a-z0-9.-]+(%3A\d+)?$/i, 'must be a host name, e.g. example.com');

/** How long one RPC URL has to answer one request: CHAIN_RPC_TIMEOUT_MS, and a Solana network's own. */
const rpcTimeoutMs = z.coerce.number().int().min(100).max(120_000);

const schema = z.object({
  AGENTGATE_MODE: z.enum(['dev', 'production']).default('production'),
  PORT: port.default(3000),
  HOST: z.string().min(1).default('0.0.0.0'),
  BASE_URL: z.url({ protocol: /^https?$/ }).transform((u) => u.replace(/\/+$/, '')),
  MAIL_DOMAIN: domain,
  DID_DOMAIN: domain,
  MASTER_KEY: masterKey,
  MASTER_KEY_VERSION: z.coerce.number().int().min(1).default(1),
  // Older master keys kept only until `agentgate rotate-master-key` has re-wrapped everything:
  // "1:<key>,2:<key>", same encodings as MASTER_KEY.
  MASTER_KEYS_PREVIOUS: z.string().regex(/^\d+:[^,]+(,\d+:[^,]+)*$/, 'must look like "1:<key>,2:<key>"').optional(),
  MONGODB_URI: z.string().regex(/^mongodb(\+srv)?:\/\//, 'must be a mongodb:// or mongodb+srv:// URI'),
  MONGODB_DB: z.string().regex(/^[A-Za-z0-9_-]{1,60}$/).default('agentgate'),
  // Connections one process opens to the database at most; what is asked beyond waits its turn. It bounds
  // what every process together can put on the database at once (the driver's default is 100).
  MONGODB_MAX_POOL_SIZE: z.coerce.number().int().min(1).max(1000).default(32),
  TRUST_PROXY: bool.default(false),
  // Structured JSON logs on stdout (pino), one object per line with the request id.
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  // Prometheus metrics. METRICS_TOKEN turns on GET /metrics on the main port behind that bearer token;
  // METRICS_PORT serves /metrics without a token on its own listener (METRICS_HOST, loopback by default),
  // for a scraper on a private network and for `agentgate worker`, which has no other HTTP listener.
  METRICS_TOKEN: z.string().regex(/^[\x21-\x7e]{16,256}$/, 'must be 16 to 256 printable characters, no spaces').optional(),
  METRICS_PORT: port.optional(),
  METRICS_HOST: z.string().min(1).default('127.0.0.1'),
  // URLs that users give (an endpoint's URL checked at registration, webhook receivers, payments_pay's
  // sellers, DID documents) are fetched only at public addresses. These private ones are let through too:
  // IPs or CIDR ranges, comma-separated ("10.0.5.0/24,127.0.0.1"), for sellers and receivers on the
  // operator's own network. Cloud metadata host names stay refused.
  ALLOWED_PRIVATE_ADDRESSES: z.string().refine((text) => { try { parseAddressRanges(text); return true; } catch { return false; } },
    'must be IP addresses or CIDR ranges, comma-separated').optional(),
  SIGNUP_RATE_LIMIT_PER_MINUTE: z.coerce.number().int().min(1).default(10),
  MAX_BODY_BYTES: z.coerce.number().int().min(1024).default(1024 * 1024),
  // The chain payments settle on. Without CHAIN_RPC_URL the payment routes answer 503.
  CHAIN_RPC_URL: z.url({ protocol: /^(https?|wss?)$/ }).optional(),
  // More RPC URLs of the same chain, comma-separated, asked in order when CHAIN_RPC_URL fails (see
  // server/chain/rpc-transport.ts); CHAIN_RPC_TIMEOUT_MS is how long one URL has to answer one request.
  CHAIN_RPC_URLS: z.string()
    .transform((value) => value.split(',').map((url) => url.trim()).filter(Boolean))
    .pipe(z.array(z.url({ protocol: /^https?$/, message: 'must be comma-separated http(s) URLs' })))
    .optional(),
  CHAIN_RPC_TIMEOUT_MS: rpcTimeoutMs.default(5_000),
  // Any EVM network of the table (packages/x402-wire/src/networks.ts), by v1 name or CAIP-2 id.
  CHAIN_NETWORK: z.string().default('base').transform((value, ctx) => {
    const network = findNetwork(value);
    if (network) return network.name;
    ctx.addIssue({ code: 'custom', message: `must be a network of the table, by name or CAIP-2 id (${NETWORKS.map((n) => n.name).join(', ')})` });
    return z.NEVER;
  }),
  // Several networks at once, comma-separated (v1 names or CAIP-2 ids), the first the default one (the
  // seller settings' network, the buyer wallets'). The network CHAIN_NETWORK names reads CHAIN_RPC_URL(S),
  // USDC_* and RELAYER_PRIVATE_KEY(S); every other one its own <NAME>_RPC_URL, <NAME>_RPC_URLS,
  // <NAME>_USDC_ADDRESS, <NAME>_USDC_EIP712_NAME, <NAME>_USDC_EIP712_VERSION and <NAME>_RELAYER_PRIVATE_KEYS
  // (NAME: the v1 name in capitals, POLYGON_AMOY; the relayer keys default to RELAYER_PRIVATE_KEY(S):
  // one key may serve several networks). Unset: CHAIN_NETWORK alone.
  NETWORKS: z.string().optional(),
  USDC_ADDRESS: z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be a 0x-prefixed address').optional(),
  USDC_EIP712_NAME: z.string().min(1).optional(),
  USDC_EIP712_VERSION: z.string().min(1).optional(),
  RELAYER_PRIVATE_KEY: z.string().regex(/^0x[0-9a-fA-F]{64}$/, 'must be a 0x-prefixed 32-byte hex key').optional(),
  // More relayer accounts for settlement, comma-separated: each sends its own transactions in parallel.
  RELAYER_PRIVATE_KEYS: z.string().regex(/^0x[0-9a-fA-F]{64}(,0x[0-9a-fA-F]{64})*$/, 'must be comma-separated 0x-prefixed 32-byte hex keys').optional(),
  // The batch-settlement receiver authorizer (signs channel claims and refunds for sellers that delegate it).
  // Unset: one key is generated once and kept in the database, sealed under the master key.
  RECEIVER_AUTHORIZER_PRIVATE_KEY: z.string().regex(/^0x[0-9a-fA-F]{64}$/, 'must be a 0x-prefixed 32-byte hex key').optional(),
  // Channels sold through our middleware: how often accepted vouchers are claimed (many channels in one
  // transaction) and settled to the seller, and how long a channel may sit idle before the payer gets the
  // rest back.
  // At most 10 minutes: a round always comes before a withdrawal can complete (the delay our 402s name is 15 minutes).
  CHANNEL_SWEEP_EVERY_MS: z.coerce.number().int().min(1000).max(600_000).default(60_000),
  CHANNEL_IDLE_REFUND_MS: z.coerce.number().int().min(1000).default(24 * 3_600_000),
  // Channels agents' wallets pay through (payments_pay): after this long without a call, the wallet asks the
  // seller for the rest back (checked every CHANNEL_SWEEP_EVERY_MS, one process a round).
  BUYER_CHANNEL_IDLE_REFUND_MS: z.coerce.number().int().min(1000).default(3_600_000),
  // Settlement: at most this many authorizations per transaction (1 turns batching off), and at most this
  // many transactions in flight per relayer account (then requests wait and are batched).
  SETTLEMENT_BATCH_MAX: z.coerce.number().int().min(1).max(100).default(50),
  SETTLEMENT_PIPELINE_DEPTH: z.coerce.number().int().min(1).max(64).default(4),
  // A buyer's answer waits at most this long for the chain; then it is `settlement_pending` and a retry with
  // the same payment-identifier answers the final result (the settlement itself goes on).
  SETTLEMENT_TIMEOUT_MS: z.coerce.number().int().min(1000).max(300_000).default(20_000),
  // On a chain that mines on a timer, a batch leaves this long before the next block is due.
  SETTLEMENT_SEND_MARGIN_MS: z.coerce.number().int().min(0).max(10_000).default(250),
  // A settlement counts as done once its block has this many blocks on top, itself included (1: mined).
  // More on a chain that reorganises: the buyer's answer waits for it, and a transaction a reorg drops is sent again.
  SETTLEMENT_CONFIRMATIONS: z.coerce.number().int().min(1).max(64).default(1),
  // The gas limit of every transaction the relayers send, in percent of ours (fixed per kind of transaction,
  // or an estimate): more on a chain that counts its L1 data in gas units (Arbitrum), where our limits fall short.
  GAS_LIMIT_PERCENT: z.coerce.number().int().min(100).max(1000).default(100),
  // A settlement transaction unmined for this many blocks is resent with a higher fee.
  SETTLEMENT_STUCK_BLOCKS: z.coerce.number().int().min(1).max(100).default(3),
  // Never offer more than this per gas, in gwei (a ceiling through fee spikes); unset: follow the chain.
  RELAYER_MAX_FEE_GWEI: z.coerce.number().positive().optional(),
  // Relayer accounts are leased to one process at a time; a dead process's leases free up after this.
  RELAYER_LEASE_TTL_MS: z.coerce.number().int().min(1000).max(300_000).default(15_000),
  // At shutdown a relayer's lease is kept until its transactions are mined, for at most this long.
  RELAYER_DRAIN_MS: z.coerce.number().int().min(0).max(300_000).default(30_000),
  // How often the chain's head is polled while settlements are under way (idle: ten times less often).
  CHAIN_POLL_MS: z.coerce.number().int().min(20).max(10_000).default(100),
  // Payments still open this long after their claim are finished from the chain (every RECONCILE_EVERY_MS).
  RECONCILE_AFTER_MS: z.coerce.number().int().min(0).default(60_000),
  RECONCILE_EVERY_MS: z.coerce.number().int().min(100).default(30_000),
  MULTICALL3_ADDRESS: z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be a 0x-prefixed address').default('0xcA11bde05977b3631167028862bE2a173976CA11'),
  // Request limits (docs/operators/limits.md), per RATE_LIMIT_WINDOW_MS, counted across every process: per
  // API key (seller keys, which carry paid traffic, their own), per org (all its keys), per anonymous client
  // address. 0 turns one off; an org's own limits (agentgate limits set) replace the defaults for it.
  RATE_LIMIT_WINDOW_MS: z.coerce.number().int().min(1_000).max(3_600_000).default(60_000),
  RATE_LIMIT_PER_KEY: z.coerce.number().int().min(0).default(1_200),
  RATE_LIMIT_PER_SELLER_KEY: z.coerce.number().int().min(0).default(60_000),
  RATE_LIMIT_PER_ORG: z.coerce.number().int().min(0).default(120_000),
  RATE_LIMIT_PER_ANONYMOUS: z.coerce.number().int().min(0).default(600),
  // Sanctions screening (docs/operators/screening.md): every payment's payer and payTo, and every paying
  // wallet, checked before anything moves against the sources set here (none set: no screening).
  // A file of listed addresses, one per line (or a JSON array), read again whenever it changes.
  SCREENING_LIST_FILE: z.string().min(1).optional(),
  SCREENING_LIST_RELOAD_MS: z.coerce.number().int().min(100).max(3_600_000).default(5_000),
  // The chain's sanctions oracle (isSanctioned(address)); per network <NAME>_SANCTIONS_ORACLE_ADDRESS.
  SANCTIONS_ORACLE_ADDRESS: z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be a 0x-prefixed address').optional(),
  // An HTTP screening provider: POST { address, network, caip2 } -> { sanctioned: boolean, reason? }.
  SCREENING_PROVIDER_URL: z.url({ protocol: /^https?$/ }).optional(),
  SCREENING_PROVIDER_TOKEN: z.string().min(1).optional(),
  SCREENING_PROVIDER_TIMEOUT_MS: z.coerce.number().int().min(50).max(30_000).default(2_000),
  // What a source that cannot answer (provider down or slow, oracle's RPC failing) means: refuse or allow.
  SCREENING_ON_ERROR: z.enum(['refuse', 'allow']).default('refuse'),
  // How long the oracle's and the provider's verdicts are kept, shared by every process.
  SCREENING_CACHE_TTL_MS: z.coerce.number().int().min(0).max(86_400_000).default(60_000),
  // Usage quotas (docs/operators/quotas.md): each plan's monthly quotas by metric, as JSON, e.g.
  // {"FREE":{"settlements":1000,"mailSent":500},"PRO":{}}. An org is on the plan its record names (new
  // orgs: FREE; agentgate usage plan sets another); a plan or metric not set here is not limited.
  USAGE_PLANS: z.string().default('{}').transform((value, ctx) => {
    try { return JSON.parse(value) as unknown; } catch {
      ctx.addIssue({ code: 'custom', message: 'must be JSON: {"PLAN": {"settlements": N, ...}}' });
      return z.NEVER;
    }
  }).pipe(z.record(z.string().min(1).max(64), z.strictObject({
    settlements: z.number().int().min(0).optional(),
    facilitatorCalls: z.number().int().min(0).optional(),
    mailSent: z.number().int().min(0).optional(),
    mailReceived: z.number().int().min(0).optional(),
    storageBytes: z.number().int().min(0).optional(),
  }))),
  // How long quota checks reuse the deployment's usage totals: how far past a quota N processes may go.
  USAGE_CACHE_MS: z.coerce.number().int().min(0).max(60_000).default(2_000),
  // How long a server process serves resolved API keys (with their identity's scopes), and a seller's
  // settings and endpoints, from memory. A revocation, rotation or scope change reaches every process
  // through the change feed within CHANGE_FEED_POLL_MS; the TTL bounds it when the feed cannot be read.
  AUTH_CACHE_TTL_MS: z.coerce.number().int().min(0).max(60_000).default(5_000),
  // How often each process polls the change feed (server/platform/change-feed.ts) for invalidations made
  // by other processes: a revoked key is refused everywhere within about this long (well under a second).
  CHANGE_FEED_POLL_MS: z.coerce.number().int().min(20).max(1_000).default(250),
  SELLER_CACHE_TTL_MS: z.coerce.number().int().min(0).max(60_000).default(5_000),
  // Buyer wallets: the SmartAccountFactory that creates each identity's smart account (CREATE2).
  WALLET_FACTORY_ADDRESS: z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be a 0x-prefixed address').optional(),
  // ERC-8021 builder codes (x402 `builder-code` extension): this facilitator's own wallet code (`w`) and
  // service code (appended to `s`) in every settlement transaction's attribution suffix. Unset: only the
  // codes payments carry (the seller's `a`, the buyer's `s`) are appended.
  BUILDER_CODE: z.string().regex(/^[a-z0-9_]{1,32}$/, 'must be 1-32 lowercase letters, digits or _').optional(),
  BUILDER_SERVICE_CODE: z.string().regex(/^[a-z0-9_]{1,32}$/, 'must be 1-32 lowercase letters, digits or _').optional(),
  // ERC-6492: the factories whose counterfactual wallets may pay (`exact`): the facilitator deploys such a
  // wallet through its factory before settling. Comma-separated addresses; in dev mode the
  // WALLET_FACTORY_ADDRESS (our SmartAccountFactory) is allowed as well. Empty: none are.
  EIP6492_ALLOWED_FACTORIES: z.string().default('').transform((v) => v.split(',').map((a) => a.trim()).filter(Boolean))
    .pipe(z.array(z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be comma-separated 0x-prefixed addresses'))),
  // Dev mode only: the key POST /v0/dev/faucet pays test USDC from (it transfers, or mints if it owns the token).
  FAUCET_PRIVATE_KEY: z.string().regex(/^0x[0-9a-fA-F]{64}$/, 'must be a 0x-prefixed 32-byte hex key').optional(),
  // Margin for clock skew on authorization validity windows.
  PAYMENT_VALIDITY_MARGIN_SECONDS: z.coerce.number().int().min(0).max(300).default(6),
  SERVICE_SIGNING_KEY: z.string().regex(/^[0-9a-fA-F]{64}$/, 'must be a 32-byte Ed25519 seed in hex').optional(),
  // Mail transport. SMTP_PORT/SMTP_HOST default by mode (dev: 2525 on loopback; production: 25 on all
  // interfaces), see server/mail/smtp-listener.ts; 0 picks a free port (tests).
  SMTP_PORT: port.optional(),
  SMTP_HOST: z.string().min(1).optional(),
  SMTP_MAX_MESSAGE_BYTES: z.coerce.number().int().min(1024).max(15 * 1024 * 1024).default(10 * 1024 * 1024),
  SMTP_MAX_RECIPIENTS: z.coerce.number().int().min(1).max(1000).default(50),
  // Attachments of one outgoing message, decoded, in total: base64 in MIME adds a third, and the message
  // must still fit SMTP_MAX_MESSAGE_BYTES when one of our inboxes mails another.
  // Messages sent per identity and per org per MAIL_SEND_LIMIT_WINDOW_MS, over the API, MCP and SMTP
  // submission, counted across every process (server/mail/send-limits.ts); 0: no limit.
  MAIL_SEND_LIMIT_PER_IDENTITY: z.coerce.number().int().min(0).default(500),
  MAIL_SEND_LIMIT_PER_ORG: z.coerce.number().int().min(0).default(5_000),
  MAIL_SEND_LIMIT_WINDOW_MS: z.coerce.number().int().min(1_000).max(86_400_000).default(3_600_000),
  MAIL_MAX_ATTACHMENT_BYTES: z.coerce.number().int().min(1024).max(11 * 1024 * 1024).default(7 * 1024 * 1024),
  // SMTP submission for mail clients (server/mail/submission.ts), off unless a port is set: 587 with
  // STARTTLS, and 465 with TLS from the first byte. Production needs SMTP_TLS_CERT_FILE for it: the
  // password a client sends is an identity key.
  SMTP_SUBMISSION_PORT: port.optional(),
  SMTP_SUBMISSIONS_PORT: port.optional(),
  SMTP_TLS_CERT_FILE: z.string().min(1).optional(),
  SMTP_TLS_KEY_FILE: z.string().min(1).optional(),
  SMTP_RELAY_URL: z.string().regex(/^smtps?:\/\/[^\s]+$/, 'must be an smtp:// or smtps:// URL').optional(),
  DKIM_PRIVATE_KEY_FILE: z.string().min(1).optional(),
  DKIM_SELECTOR: z.string().regex(/^[A-Za-z0-9._-]{1,63}$/).default('agentgate'),
  // The DNS servers received mail is authenticated against (SPF, DKIM, DMARC, ARC), comma-separated
  // `host:port` (`[::1]:53` for IPv6); unset: the system resolver. MAIL_DNS_TIMEOUT_MS bounds one query.
  MAIL_DNS_SERVERS: z.string()
    .transform((value) => value.split(',').map((s) => s.trim()).filter(Boolean))
    .pipe(z.array(z.string().regex(/^(?:[0-9.]+|\[[0-9a-fA-F:]+\])(?::\d{1,5})?$/, 'must be comma-separated host:port pairs of IP addresses, e.g. 127.0.0.1:5353')).min(1))
    .optional(),
  MAIL_DNS_TIMEOUT_MS: z.coerce.number().int().min(100).max(30_000).default(3_000),
  // Custom mail domains (server/mail/domains): the host their MX record must name (this deployment's inbound
  // SMTP; default MAIL_DOMAIN), the SPF record their SPF must include (the one listing the relay's
  // addresses; default _spf.MAIL_DOMAIN), and how often every domain's records are checked again.
  MAIL_MX_HOST: z.string().regex(/^[a-z0-9.-]+$/i, 'must be a host name, e.g. mx.example.com').optional(),
  MAIL_SPF_INCLUDE: z.string().regex(/^[a-z0-9._-]+$/i, 'must be a domain name, e.g. _spf.example.com').optional(),
  MAIL_DOMAIN_CHECK_EVERY_MS: z.coerce.number().int().min(1000).default(3_600_000),
  // Whether unverified received mail is admitted (verdict kept) where neither the identity nor its org
  // says: false in production. `agentgate dev` turns it on while its mail catcher plays the outside world,
  // whose domains publish no DNS records here.
  MAIL_ADMIT_UNVERIFIED: bool.default(false),
  JOBS_PROCESS_EVERY_MS: z.coerce.number().int().min(10).default(2000),
  // Jobs that gave up (a webhook delivery or a mail past its last retry) are deleted after this many days;
  // the delivery or mail keeps its own record of the failure (docs/operators/retention.md).
  JOB_RETENTION_DAYS: z.coerce.number().min(1).max(3650).default(7),
  // payment.received retries wait 1, 4, 16, 64 and 300 units of this (SPEC 8); tests scale it down.
  WEBHOOK_RETRY_BASE_MS: z.coerce.number().int().min(1).default(1000),
  WEBHOOK_TIMEOUT_MS: z.coerce.number().int().min(100).max(60_000).default(10_000),
  // Webhook attempts a process runs at once. They wait on the receiver and the database, not on the
  // process's CPU: at 10, 16 paid calls at once on FerretDB outran them (webhooks 3 s late after 10 s of
  // it: npm run bench -- history), and ten receivers slow to answer held every other seller's webhooks.
  WEBHOOK_CONCURRENCY: z.coerce.number().int().min(1).max(1_000).default(50),
  // How often a worker re-dispatches outbox entries a crash left pending (also done once at start-up).
  WEBHOOK_OUTBOX_SWEEP_MS: z.coerce.number().int().min(100).default(15_000),
  // The team-chat integration (a Slack-compatible platform). It is on when the app's client id, client
  // secret and signing secret are all set; `agentgate dev` points these at its local chat platform.
  CHAT_API_URL: z.url({ protocol: /^https?$/ }).default('https://slack.com/api/'),
  CHAT_AUTHORIZE_URL: z.url({ protocol: /^https?$/ }).default('https://slack.com/oauth/v2/authorize'),
  CHAT_CLIENT_ID: z.string().min(1).optional(),
  CHAT_CLIENT_SECRET: z.string().min(1).optional(),
  CHAT_SIGNING_SECRET: z.string().min(8).optional(),
  CHAT_BOT_SCOPES: z.string().regex(/^[a-z:._-]+(,[a-z:._-]+)*$/, 'must be comma-separated scope names')
    .default('channels:read,groups:read,channels:history,groups:history,im:history,chat:write,app_mentions:read'),
  CHAT_TIMEOUT_MS: z.coerce.number().int().min(100).max(60_000).default(10_000),
  // Admin accounts (team chat is an admin preview): org ids, comma-separated, or `*` for every org
  // (`agentgate dev` uses `*` unless set). `agentgate admin grant <orgId>` makes one in the database too.
  ADMIN_ORG_IDS: z.string().regex(/^(\*|[A-Za-z0-9_-]+(,[A-Za-z0-9_-]+)*)?$/, 'must be `*` or comma-separated org ids').default(''),
}).superRefine((env, ctx) => {
  const chat = ['CHAT_CLIENT_ID', 'CHAT_CLIENT_SECRET', 'CHAT_SIGNING_SECRET'] as const;
  const missing = chat.filter((name) => !env[name]);
  if (missing.length && missing.length < chat.length) {
    ctx.addIssue({ code: 'custom', path: [missing[0]!], message: `is required when ${chat.filter((n) => env[n]).join(' and ')} is set (the chat integration needs all three)` });
  }
});

export type Env = z.input<typeof schema>;
export type Config = z.output<typeof schema> & {
  mode: Mode;
  /** The networks this backend settles on, the default one first (NETWORKS, or CHAIN_NETWORK alone). */
  networks: NetworkSettings[];
  /** The Solana networks NETWORKS lists (after an EVM default): the second chain family. */
  solanaNetworks: SolanaNetworkSettings[];
};

/**
 * One Solana network this backend settles on: <NAME>_RPC_URL, <NAME>_FEE_PAYER_KEYS (comma-separated
 * base58 64-byte secret keys, as `solana-keygen` writes them in bytes: the keys that co-sign and pay the
 * fees of buyers' transfers) and, optionally, <NAME>_USDC_MINT (default: the network's USDC) and
 * <NAME>_CHAIN_RPC_TIMEOUT_MS.
 */
export interface SolanaNetworkSettings {
  /** Its v1 name ("solana-devnet"). */
  network: string;
  rpcUrl: string;
  feePayerKeys: string[];
  usdcMint: string;
  /** How long its node has to answer one request: <NAME>_CHAIN_RPC_TIMEOUT_MS, else CHAIN_RPC_TIMEOUT_MS. */
  rpcTimeoutMs: number;
}

/** One network this backend settles on, read from its variables (see NETWORKS). */
export interface NetworkSettings {
  /** Its v1 name in the network table. */
  network: string;
  /** Undefined only for CHAIN_NETWORK without CHAIN_RPC_URL: payments are off. */
  rpcUrl: string | undefined;
  /** The further URLs asked in order when rpcUrl fails. */
  rpcUrls: string[];
  usdcAddress?: string;
  usdcEip712Name?: string;
  usdcEip712Version?: string;
  /** Relayer keys, each once. */
  relayerKeys: string[];
  /**
   * This network's own values of the tunable settings (NETWORK_TUNABLES: fee ceiling, gas limits, stuck blocks,
   * polling, timeouts, batching, Multicall3, the wallet factory), from <NAME>_<SETTING>; the rest are the global ones.
   */
  overrides: Partial<Config>;
  /** The variable each setting came from, for messages ("CHAIN_RPC_URL", "POLYGON_AMOY_RPC_URL"). */
  variable(setting: 'RPC_URL' | 'RPC_URLS' | 'USDC_ADDRESS' | 'USDC_EIP712_NAME' | 'USDC_EIP712_VERSION'): string;
}

const address = z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be a 0x-prefixed address');
const rpcUrlList = z.string()
  .transform((value) => value.split(',').map((url) => url.trim()).filter(Boolean))
  .pipe(z.array(z.url({ protocol: /^https?$/, message: 'must be comma-separated http(s) URLs' })));
/**
 * The settings a network may set for itself, <NAME>_<SETTING> (POLYGON_AMOY_SETTLEMENT_STUCK_BLOCKS=5):
 * how a chain is paced and priced differs per chain (block time, fee market, RPC latency). The default
 * network uses the global ones; another network falls back to them.
 */
export const NETWORK_TUNABLES = [
  'CHAIN_RPC_TIMEOUT_MS', 'CHAIN_POLL_MS', 'RELAYER_MAX_FEE_GWEI', 'SETTLEMENT_CONFIRMATIONS', 'SETTLEMENT_STUCK_BLOCKS', 'SETTLEMENT_TIMEOUT_MS',
  'SETTLEMENT_BATCH_MAX', 'SETTLEMENT_PIPELINE_DEPTH', 'SETTLEMENT_SEND_MARGIN_MS', 'MULTICALL3_ADDRESS', 'WALLET_FACTORY_ADDRESS', 'GAS_LIMIT_PERCENT',
  'SANCTIONS_ORACLE_ADDRESS',
] as const;

/** The configuration as one network sees it: the global settings with that network's own (NETWORK_TUNABLES). */
export function configFor(config: Config, settings: NetworkSettings | undefined): Config {
  return settings && Object.keys(settings.overrides).length ? { ...config, ...settings.overrides } : config;
}

/** A network's own variables (<NAME>_*), the same rules as CHAIN_*'s. */
const networkVariables = z.object({
  RPC_URL: z.url({ protocol: /^(https?|wss?)$/ }),
  RPC_URLS: rpcUrlList.optional(),
  USDC_ADDRESS: address.optional(),
  USDC_EIP712_NAME: z.string().min(1).optional(),
  USDC_EIP712_VERSION: z.string().min(1).optional(),
  RELAYER_PRIVATE_KEYS: z.string().regex(/^0x[0-9a-fA-F]{64}(,0x[0-9a-fA-F]{64})*$/, 'must be comma-separated 0x-prefixed 32-byte hex keys').optional(),
});

/** The prefix of a network's own variables: its v1 name in capitals ("polygon-amoy" -> POLYGON_AMOY). */
export function networkVariablePrefix(network: string): string {
  return network.toUpperCase().replace(/[^A-Z0-9]+/g, '_');
}

function distinctKeys(keys: Array<string | undefined>): string[] {
  return [...new Set(keys.filter((k): k is string => !!k).map((k) => k.toLowerCase()))];
}

/** NETWORKS (or CHAIN_NETWORK alone) read into one NetworkSettings each; problems are added to `problems`. */
function networksOf(data: z.output<typeof schema>, input: Record<string, string | undefined>, problems: Map<string, string>): NetworkSettings[] {
  const sharedKeys = distinctKeys([data.RELAYER_PRIVATE_KEY, ...(data.RELAYER_PRIVATE_KEYS ?? '').split(',')]);
  const names: string[] = [];
  for (const entry of (data.NETWORKS ?? data.CHAIN_NETWORK).split(',').map((n) => n.trim()).filter(Boolean)) {
    const info = findNetwork(entry);
    if (findSolanaNetwork(entry)) continue; // solanaNetworksOf reads it
    if (!info) problems.set('NETWORKS', `names ${entry}, not a network of the table, by name or CAIP-2 id (${[...NETWORKS, ...SOLANA_NETWORKS].map((n) => n.name).join(', ')})`);
    else if (names.includes(info.name)) problems.set('NETWORKS', `names ${info.name} twice`);
    else names.push(info.name);
  }
  // CHAIN_* configure the network CHAIN_NETWORK names: set for a network NETWORKS leaves out, they would be ignored.
  if (data.NETWORKS && data.CHAIN_RPC_URL && names.length && !names.includes(data.CHAIN_NETWORK)) {
    problems.set('CHAIN_RPC_URL', `is for CHAIN_NETWORK ${data.CHAIN_NETWORK}, which NETWORKS (${names.join(', ')}) does not list: set CHAIN_NETWORK to the network it serves`);
  }
  return names.flatMap((network): NetworkSettings[] => {
    if (network === data.CHAIN_NETWORK) {
      return [{
        network, rpcUrl: data.CHAIN_RPC_URL, rpcUrls: data.CHAIN_RPC_URLS ?? [], usdcAddress: data.USDC_ADDRESS, usdcEip712Name: data.USDC_EIP712_NAME,
        usdcEip712Version: data.USDC_EIP712_VERSION, relayerKeys: sharedKeys, overrides: {}, variable: (setting) => (setting.startsWith('RPC') ? `CHAIN_${setting}` : setting),
      }];
    }
    const prefix = networkVariablePrefix(network);
    const own = Object.fromEntries(Object.keys(networkVariables.shape).flatMap((key) => (input[`${prefix}_${key}`] ? [[key, input[`${prefix}_${key}`]]] : [])));
    const parsed = networkVariables.safeParse(own);
    if (!parsed.success) {
      for (const issue of parsed.error.issues) {
        const name = `${prefix}_${String(issue.path[0])}`;
        if (!problems.has(name)) problems.set(name, own[String(issue.path[0])] === undefined ? `is required: NETWORKS lists ${network}` : issue.message);
      }
      return [];
    }
    const v = parsed.data;
    // Only the tunables this network sets: parsed by the global rules, kept without their defaults.
    const overrides: Record<string, unknown> = {};
    for (const key of NETWORK_TUNABLES) {
      const raw = input[`${prefix}_${key}`];
      if (raw === undefined) continue;
      const value = schema.shape[key].safeParse(raw);
      if (value.success) overrides[key] = value.data;
      else problems.set(`${prefix}_${key}`, value.error.issues[0]?.message ?? 'is not valid');
    }
    return [{
      network, rpcUrl: v.RPC_URL, rpcUrls: v.RPC_URLS ?? [], usdcAddress: v.USDC_ADDRESS, usdcEip712Name: v.USDC_EIP712_NAME, usdcEip712Version: v.USDC_EIP712_VERSION,
      relayerKeys: v.RELAYER_PRIVATE_KEYS ? distinctKeys(v.RELAYER_PRIVATE_KEYS.split(',')) : sharedKeys,
      overrides: overrides as Partial<Config>, variable: (setting) => `${prefix}_${setting}`,
    }];
  });
}

const base58Key = z.string().regex(/^[1-9A-HJ-NP-Za-km-z]{86,90}$/, 'must be comma-separated base58 64-byte secret keys');
const solanaVariables = z.object({
  RPC_URL: z.url({ protocol: /^https?$/ }),
  FEE_PAYER_KEYS: z.string().transform((v) => v.split(',').map((k) => k.trim()).filter(Boolean)).pipe(z.array(base58Key).min(1, 'must name at least one key')),
  USDC_MINT: z.string().regex(SOLANA_ADDRESS, 'must be a base58 address').optional(),
  CHAIN_RPC_TIMEOUT_MS: rpcTimeoutMs.optional(),
});

/** The Solana networks NETWORKS lists, each read from its own variables (SOLANA_DEVNET_RPC_URL, ...). */
function solanaNetworksOf(data: z.output<typeof schema>, input: Record<string, string | undefined>, problems: Map<string, string>): SolanaNetworkSettings[] {
  const out: SolanaNetworkSettings[] = [];
  const entries = (data.NETWORKS ?? '').split(',').map((n) => n.trim()).filter(Boolean);
  entries.forEach((entry, i) => {
    const info = findSolanaNetwork(entry);
    if (!info) return;
    if (i === 0) problems.set('NETWORKS', `starts with ${info.name}: the default network (the first) is an EVM network; list Solana networks after it`);
    if (out.some((n) => n.network === info.name)) { problems.set('NETWORKS', `names ${info.name} twice`); return; }
    const prefix = networkVariablePrefix(info.name);
    const own = Object.fromEntries(Object.keys(solanaVariables.shape).flatMap((key) => (input[`${prefix}_${key}`] ? [[key, input[`${prefix}_${key}`]]] : [])));
    const parsed = solanaVariables.safeParse(own);
    if (!parsed.success) {
      for (const issue of parsed.error.issues) {
        const name = `${prefix}_${String(issue.path[0])}`;
        if (!problems.has(name)) problems.set(name, own[String(issue.path[0])] === undefined ? `is required: NETWORKS lists ${info.name}` : issue.message);
      }
      return;
    }
    out.push({
      network: info.name, rpcUrl: parsed.data.RPC_URL, feePayerKeys: [...new Set(parsed.data.FEE_PAYER_KEYS)], usdcMint: parsed.data.USDC_MINT ?? info.usdcMint,
      rpcTimeoutMs: parsed.data.CHAIN_RPC_TIMEOUT_MS ?? data.CHAIN_RPC_TIMEOUT_MS,
    });
  });
  return out;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** Validates the environment once at start-up; every bad or missing variable is named at once, in one line. */
export function loadConfig(env: Record<string, string | undefined>): Config {
  const input = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const result = schema.safeParse(input);
  if (!result.success) {
    const problems = new Map<string, string>();
    for (const issue of result.error.issues) {
      const name = String(issue.path[0] ?? 'environment');
      if (!problems.has(name)) problems.set(name, issue.code === 'invalid_type' && input[name] === undefined ? 'is required' : issue.message);
    }
    throw new ConfigError(`configuration error: ${[...problems].map(([name, message]) => `${name} ${message}`).join('; ')}`);
  }
  const problems = new Map<string, string>();
  const networks = networksOf(result.data, input, problems);
  const solanaNetworks = solanaNetworksOf(result.data, input, problems);
  const submission = result.data.SMTP_SUBMISSION_PORT !== undefined || result.data.SMTP_SUBMISSIONS_PORT !== undefined;
  if (submission && result.data.AGENTGATE_MODE === 'production' && !result.data.SMTP_TLS_CERT_FILE) {
    problems.set(result.data.SMTP_SUBMISSION_PORT !== undefined ? 'SMTP_SUBMISSION_PORT' : 'SMTP_SUBMISSIONS_PORT', 'needs SMTP_TLS_CERT_FILE and SMTP_TLS_KEY_FILE: mail clients log in with identity keys, which must not cross the network in the clear');
  }
  if (result.data.SMTP_SUBMISSIONS_PORT !== undefined && !result.data.SMTP_TLS_CERT_FILE) problems.set('SMTP_SUBMISSIONS_PORT', 'needs SMTP_TLS_CERT_FILE and SMTP_TLS_KEY_FILE (TLS from the first byte)');
  if (problems.size) throw new ConfigError(`configuration error: ${[...problems].map(([name, message]) => `${name} ${message}`).join('; ')}`);
  return { ...result.data, mode: result.data.AGENTGATE_MODE, networks, solanaNetworks };
}
