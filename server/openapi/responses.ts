import { z } from 'zod';
import { JwsReceiptSchema } from 'agentgate-x402-wire';

/**
 * The shapes of the answers integrators build on (payments, receipts, the facilitator API), for the
 * OpenAPI document. Tests and the schemathesis run hold the live answers to them.
 */

/** Every error: `{error, message, status}`, the status repeated from the response line. */
export const errorBody = z.object({
  error: z.string().describe('A stable machine-readable code, e.g. validation_error, not_found'),
  message: z.string().describe('What went wrong, for a person'),
  status: z.number().int().describe('The HTTP status'),
}).loose();

const isoTime = z.string().describe('ISO 8601 date-time');
const nullableIso = isoTime.nullable();

export const signedReceipt = z.object({
  body: z.record(z.string(), z.unknown()).describe('The signed fields: paymentId, payer, recipient, amount, network, txHash, resourceUrl, timestamp'),
  signature: z.string().describe('base64url Ed25519 signature over the canonical JSON of body'),
  publicKey: z.string().describe('Multibase Ed25519 key the signer claims; verify against the DID document instead'),
  did: z.string(),
});

const paymentFields = {
  id: z.string(),
  direction: z.literal('in'),
  endpointId: z.string().nullable(),
  network: z.string(),
  payerAddress: z.string(),
  recipientAddress: z.string(),
  amountUsdcRaw: z.string().describe('Atomic USDC (6 decimals) charged; for upto, the amount the seller named at settlement (may be 0)'),
  amountUsdc: z.string(),
  txHash: z.string().nullable(),
  status: z.enum(['held', 'verified', 'settled', 'failed', 'voided']).describe('auth-capture: held is authorized into escrow; voided went back to the buyer'),
  resourceUrl: z.string(),
  failureReason: z.string().nullable(),
  createdAt: isoTime,
  settledAt: nullableIso,
  scheme: z.enum(['exact', 'upto', 'auth-capture']).describe('exact: EIP-3009 for the price; upto: a Permit2 permit for at most maxAmountUsdcRaw, settled for what was used; auth-capture: authorized into escrow, captured (amountUsdcRaw) after the handler, refundable'),
  maxAmountUsdcRaw: z.string().describe('The most the buyer allowed (upto, auth-capture); for exact, the same as amountUsdcRaw'),
  assetTransferMethod: z.enum(['eip3009', 'permit2']).describe('How the money moved: an EIP-3009 transferWithAuthorization, or a Permit2 witness transfer (upto; exact on a route asking assetTransferMethod permit2)'),
  refundedUsdcRaw: z.string().optional().describe('auth-capture: what was refunded of it so far'),
};

export const payment = z.object(paymentFields);
export const paymentList = z.object({ payments: z.array(payment), count: z.number().int(), nextPageToken: z.string().optional() });
export const paymentDetail = z.object({
  ...paymentFields,
  authorizationNonce: z.string(),
  x402Version: z.union([z.literal(1), z.literal(2)]),
  signedReceipt: signedReceipt.nullable(),
  offerReceipt: JwsReceiptSchema.nullable().describe('The same receipt in the x402 offer-receipt extension\'s JWS form'),
});

/** A call paid through a batch-settlement channel (one accepted voucher), as a record. */
const channelCallFields = {
  id: z.string().describe('`chc_…`: GET /v0/payments/{id} answers it like a payment'),
  direction: z.literal('in'),
  scheme: z.literal('batch-settlement'),
  channelId: z.string(),
  endpointId: z.string().nullable(),
  network: z.string(),
  payerAddress: z.string(),
  recipientAddress: z.string(),
  amountUsdcRaw: z.string().describe('What this call was charged (atomic USDC): its price, or for a route priced by usage what the handler reported (its maximum while held)'),
  amountUsdc: z.string(),
  cumulativeAmountUsdcRaw: z.string().describe('What the channel has charged after this call (the voucher\'s cumulative amount, for a fixed price)'),
  maxAmountUsdcRaw: z.string().nullable().describe('A route priced by usage: the most this call could be charged; null for a fixed price'),
  resourceUrl: z.string(),
  status: z.enum(['held', 'accepted', 'claimed']).describe('held: the seller\'s handler is running; accepted: paid, not claimed yet; claimed: a claim transaction carried its value'),
  txHash: z.string().nullable().describe('The claim transaction that carried the call\'s value, once claimed'),
  createdAt: isoTime,
  acceptedAt: isoTime.describe('When the voucher was accepted: the call was paid'),
  claimedAt: nullableIso.describe('When the claim that carried it was recorded'),
  claimId: z.string().nullable(),
};
export const channelCall = z.object(channelCallFields);
export const channelCallDetail = z.object({
  ...channelCallFields,
  voucherSignature: z.string().describe('The payer\'s EIP-712 voucher signature over (channelId, maxClaimableAmount): cumulativeAmountUsdcRaw plus, for a call priced by usage, what it allowed and did not use'),
  signedReceipt: signedReceipt.nullable().describe('Signed when the call was paid (txHash "": the value is claimed later); verified like any receipt'),
});
export const channelCallList = z.object({ calls: z.array(channelCall), count: z.number().int(), nextPageToken: z.string().optional() });
export const channel = z.object({
  id: z.string(),
  network: z.string(),
  payerAddress: z.string(),
  recipientAddress: z.string(),
  state: z.enum(['open', 'withdrawing', 'refunded']).describe('withdrawing: the payer started a timed withdrawal; refunded: the rest went back to the payer and no call was paid since'),
  depositedUsdcRaw: z.string().describe('Deposits sent through agentgate'),
  acceptedUsdcRaw: z.string().describe('What the paid calls add up to (the last captured voucher)'),
  acceptedUsdc: z.string(),
  claimedUsdcRaw: z.string(),
  refundedUsdcRaw: z.string(),
  balanceUsdcRaw: z.string().describe('The chain\'s balance when a call last read it'),
  balanceSyncedAt: isoTime,
  withdrawRequestedAt: nullableIso,
  callCount: z.number().int(),
  lastCallAt: nullableIso,
  createdAt: isoTime,
});
export const channelList = z.object({ channels: z.array(channel), count: z.number().int(), nextPageToken: z.string().optional() });

export const redeemed = z.object({
  ok: z.literal(true),
  paymentId: z.string(),
  paymentResponse: z.object({ success: z.literal(true), transaction: z.string(), network: z.string(), payer: z.string(), amount: z.string().optional().describe('upto: the atomic amount charged'), extensions: z.record(z.string(), z.unknown()).optional(), extra: z.record(z.string(), z.unknown()).optional().describe('batch-settlement: chargedAmount and the channel after the call (channelState with chargedCumulativeAmount)') }),
});

export const held = z.object({
  ok: z.literal(true),
  holdId: z.string().describe('The payment id: capture or release it'),
  payer: z.string(),
  expiresAt: isoTime.describe('Released by itself, not charged, if not captured by then'),
});
export const holdReleased = z.object({ holdId: z.string(), released: z.literal(true) });
export const channelReleased = z.object({ released: z.boolean() });
export const signedIn = z.union([
  z.object({ granted: z.literal(true), payer: z.string(), paymentId: z.string().describe('The earlier payment that bought the access'), transaction: z.string() }),
  z.object({ granted: z.literal(false), reason: z.string().describe('invalid_siwx_* as the extension names them, or siwx_not_paid'), message: z.string() }),
]);

export const supported = z.object({
  kinds: z.array(z.object({
    x402Version: z.number().int(), scheme: z.string(), network: z.string(),
    extra: z.union([
      z.object({ facilitatorAddress: z.string().describe('upto: the account that settles, which the buyer names in its permit\'s witness') }),
      z.object({
        captureAuthorizer: z.string().describe('auth-capture: the operator (one of our relayers) a seller copies into its offer'),
        authCaptureEscrow: z.string(), minFeeBps: z.literal(0), maxFeeBps: z.literal(0),
        operators: z.array(z.never()).describe('No contract operators admitted: only the delegated operator'),
      }),
      z.object({ receiverAuthorizer: z.string().describe('batch-settlement: agentgate\'s receiver authorizer, which a seller names in its channels to have agentgate sign their claims and refunds') }),
    ]).optional(),
  })),
  extensions: z.array(z.string()),
  signers: z.record(z.string(), z.array(z.string())),
});

const discoveryItem = z.object({
  resource: z.string(),
  type: z.enum(['http', 'mcp']),
  x402Version: z.literal(2),
  accepts: z.array(z.record(z.string(), z.unknown())),
  lastUpdated: isoTime,
  description: z.string().optional(),
  mimeType: z.string().optional(),
  serviceName: z.string().optional(),
  tags: z.array(z.string()).optional(),
  iconUrl: z.string().optional(),
  extensions: z.record(z.string(), z.unknown()).optional().describe('A resource cataloged from a payment: its bazaar declaration (info, schema)'),
  metadata: z.record(z.string(), z.unknown()).optional().describe('A registered endpoint: description, priceUsdc, pricing, the schemas its seller declared'),
});

export const discovery = z.object({
  x402Version: z.literal(2),
  items: z.array(discoveryItem),
  pagination: z.object({ limit: z.number().int(), offset: z.number().int(), total: z.number().int() }),
});

export const discoverySearch = z.object({
  x402Version: z.literal(2),
  resources: z.array(discoveryItem),
  pagination: z.object({ limit: z.number().int(), cursor: z.string().nullable().describe('The next page\'s cursor; null at the end') }),
});

/** A wallet channel's timed withdrawal (server/buyer/schemes/batch-settlement/evm/withdrawal.ts). */
const channelWithdrawal = z.object({
  status: z.enum(['starting', 'pending', 'finalized', 'ended']).describe('pending: started, waiting for its delay; finalized: paid out; ended: the seller\'s refund ended it first'),
  startedBy: z.enum(['request', 'idle_round']).describe('The identity, or the idle round after the seller did not refund'),
  amountUsdc: z.string().describe('What the start asked for: the balance above what accepted vouchers committed'),
  startedAt: isoTime,
  finalizableAt: nullableIso.describe('When the chain lets it be finalized (the chain\'s clock)'),
  txHash: z.string().nullable().describe('The owner key\'s initiateWithdraw'),
  fundingTxHash: z.string().nullable().describe('The relayer\'s transfer of the owner key\'s gas for it (null: it held enough)'),
  finalizedAt: nullableIso,
  finalizeTxHash: z.string().nullable(),
  finalizeFundingTxHash: z.string().nullable(),
  withdrawnUsdc: z.string().nullable().describe('What came back to the wallet (less than asked when the seller claimed vouchers first)'),
});

export const channelWithdrawalStarted = channelWithdrawal.extend({ ok: z.literal(true), channelId: z.string() });

export const walletChannels = z.object({
  channels: z.array(z.object({
    channelId: z.string(),
    network: z.string(),
    receiver: z.string(),
    resourceUrl: z.string(),
    calls: z.number().int(),
    depositedUsdc: z.string(),
    chargedUsdc: z.string().describe('The last accepted voucher'),
    claimedUsdc: z.string(),
    balanceUsdc: z.string(),
    availableUsdc: z.string().describe('Not yet committed by a voucher'),
    refundedUsdc: z.string().describe('Come back to the wallet: a refund or a withdrawal'),
    withdrawalPending: z.boolean().describe('The chain has a timed withdrawal of the channel under way'),
    createdAt: isoTime,
    withdrawal: channelWithdrawal.nullable().describe('The latest timed withdrawal the wallet started'),
  })),
  count: z.number().int(),
});

/** batch-settlement: a channel as the contract has it. */
const channelState = z.object({
  channelId: z.string(),
  balance: z.string().describe('Atomic units deposited and not withdrawn or refunded'),
  totalClaimed: z.string().describe('Atomic units the receiver claimed of it'),
  withdrawRequestedAt: z.number().int().describe('Unix seconds a timed withdrawal started; 0: none'),
  refundNonce: z.string().describe('The nonce the next cooperative refund must carry'),
});

export const verifyAnswer = z.object({
  isValid: z.boolean(),
  payer: z.string().optional(),
  invalidReason: z.string().optional(),
  invalidMessage: z.string().optional(),
  extra: channelState.optional().describe('batch-settlement: the channel\'s snapshot (deposit and voucher payloads)'),
});

export const settleAnswer = z.object({
  success: z.boolean(),
  transaction: z.string().describe('The transaction hash; empty when nothing settled'),
  network: z.string(),
  payer: z.string().optional(),
  amount: z.string().optional().describe('The atomic amount charged (upto: the settle requirements\' amount, possibly 0 with an empty transaction)'),
  errorReason: z.string().optional(),
  errorMessage: z.string().optional(),
  extensions: z.record(z.string(), z.unknown()).optional(),
  extra: z.object({ channelState }).optional().describe('batch-settlement: the channel after a deposit or refund'),
});

export const didDocument = z.object({
  '@context': z.unknown(),
  id: z.string(),
  verificationMethod: z.array(z.object({ id: z.string(), type: z.string(), controller: z.string(), publicKeyMultibase: z.string() })),
  authentication: z.array(z.string()),
  assertionMethod: z.array(z.string()),
  service: z.array(z.record(z.string(), z.unknown())).optional(),
});

/** An A2A v1.0 AgentCard (the fields agentgate writes; the A2A JSON Schema is the contract, tested in test/agent-card). */
const agentInterface = z.object({ url: z.string(), protocolBinding: z.string(), protocolVersion: z.string() });
const agentSkill = z.object({
  id: z.string(), name: z.string(), description: z.string(), tags: z.array(z.string()),
  examples: z.array(z.string()).optional(), securityRequirements: z.array(z.record(z.string(), z.unknown())).optional(),
});
export const agentCard = z.object({
  name: z.string(),
  description: z.string(),
  supportedInterfaces: z.array(agentInterface).min(1).describe('How the agent is reached (MCP, mail, x402, the REST API), each binding a URI; no A2A binding, since there is no A2A task endpoint'),
  provider: z.object({ url: z.string(), organization: z.string() }).optional(),
  version: z.string(),
  documentationUrl: z.string().optional(),
  capabilities: z.record(z.string(), z.unknown()),
  securitySchemes: z.record(z.string(), z.record(z.string(), z.unknown())).optional(),
  defaultInputModes: z.array(z.string()),
  defaultOutputModes: z.array(z.string()),
  skills: z.array(agentSkill).min(1),
  signatures: z.array(z.object({ protected: z.string(), signature: z.string() })).describe('JWS (detached payload: the RFC 8785 canonical JSON of the card without signatures), EdDSA, kid: the service DID key, jku: /.well-known/jwks.json'),
});

export const jwks = z.object({
  keys: z.array(z.object({ kty: z.literal('OKP'), crv: z.literal('Ed25519'), x: z.string(), kid: z.string(), use: z.literal('sig'), alg: z.literal('EdDSA') })),
});

/** The MCP endpoint answers protocol errors as JSON-RPC, and key errors as `{error, message, status}`. */
export const mcpError = z.union([
  errorBody,
  z.object({ jsonrpc: z.literal('2.0'), id: z.union([z.string(), z.number(), z.null()]), error: z.object({ code: z.number().int(), message: z.string() }).loose() }).loose(),
]);

export const health = z.object({ status: z.literal('ok') });
/** What a process does in settlement, and who holds which relayer lane of the deployment (see docs/operators/settlement.md). */
const settlementPart = z.object({
  process: z.string(),
  role: z.enum(['serve', 'worker', 'none']),
  accepts: z.boolean(),
  sends: z.array(z.string()),
  queued: z.number().int(),
  oldestQueuedMs: z.number(),
  awaiting: z.number().int(),
  problems: z.array(z.string()),
  lanes: z.array(z.object({ address: z.string(), holder: z.string(), state: z.enum(['active', 'starved', 'draining']), inFlight: z.number().int() })),
});
export const ready = z.object({
  status: z.enum(['ready', 'degraded']), checks: z.record(z.string(), z.string()), message: z.string().optional(), settlement: settlementPart.optional(), webhooks: z.object({ oldestDueSeconds: z.number() }).optional(),
  /** The other networks' settlement, by CAIP-2 id (the default network's is `settlement`). */
  networks: z.record(z.string(), z.object({ settlement: settlementPart })).optional(),
});

/** A refund (POST /v0/payments/{id}/refund, GET /v0/payments/{id}/refunds). */
export const refund = z.object({
  id: z.string().describe('<paymentId>:refund:<n>'),
  paymentId: z.string(),
  amountUsdcRaw: z.string(),
  amountUsdc: z.string(),
  reason: z.string(),
  status: z.enum(['refunded', 'pending', 'failed']).describe('pending: sent, not yet confirmed; it goes on'),
  txHash: z.string().nullable(),
  failureReason: z.string().nullable(),
  receipt: signedReceipt.nullable().describe('The refund\'s own signed receipt (kind "refund"), once refunded'),
  createdAt: isoTime,
  refundedAt: nullableIso,
  payment: z.object({ capturedUsdcRaw: z.string(), refundedUsdcRaw: z.string() }),
});
export const refundList = z.object({ refunds: z.array(refund) });

const usageMetric = z.object({
  used: z.number().int().describe('This month so far (storageBytes: kept now)'),
  quota: z.number().int().nullable().describe("The plan's quota; null: not limited"),
  remaining: z.number().int().nullable().describe('What is left of the quota; null: not limited'),
});

/** GET /v0/usage. */
export const usage = z.object({
  orgId: z.string(),
  month: z.string().describe('YYYY-MM, UTC'),
  plan: z.string().describe("The org's plan, whose quotas the operator sets (USAGE_PLANS)"),
  metrics: z.object({
    settlements: usageMetric, facilitatorCalls: usageMetric, mailSent: usageMetric, mailReceived: usageMetric, storageBytes: usageMetric,
  }),
  settlements: z.array(z.object({ scheme: z.string(), network: z.string(), count: z.number().int() })).describe('Settlements by scheme and network, the most first'),
});
