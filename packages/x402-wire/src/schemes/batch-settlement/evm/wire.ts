import { z } from 'zod';
import { EvmAddress, TokenDomainExtraSchema } from '../../../evm.js';
import { Caip2NetworkSchema } from '../../../codec/v2.js';

/**
 * The x402 `batch-settlement` scheme's requirements on EVM (v2 only), as a buyer reads them (field names
 * from specs/schemes/batch-settlement/scheme_batch_settlement_evm.md and @x402/evm 2.27): the price of one
 * call, the receiver authorizer the channel must name (never zero), the channel's withdrawal delay, and
 * how a deposit pays in (ERC-3009 unless the seller says Permit2).
 */
export const BatchSettlementRequirementsExtraSchema = TokenDomainExtraSchema.extend({
  receiverAuthorizer: EvmAddress.refine((a) => !/^0x0{40}$/i.test(a), 'must not be the zero address'),
  withdrawDelay: z.number().int().positive().optional(),
  assetTransferMethod: z.enum(['eip3009', 'permit2']).optional(),
}).loose();

export const BatchSettlementRequirementsV2Schema = z.object({
  scheme: z.literal('batch-settlement'),
  network: Caip2NetworkSchema,
  /** The price of this call, atomic units. */
  amount: z.string().regex(/^\d{1,39}$/),
  asset: EvmAddress,
  payTo: EvmAddress,
  maxTimeoutSeconds: z.number().int().positive(),
  extra: BatchSettlementRequirementsExtraSchema,
});
export type BatchSettlementRequirementsV2Buyer = z.infer<typeof BatchSettlementRequirementsV2Schema>;

/** Where a seller's corrective 402 says the channel stands (extra.channelState), as far as a buyer reads it. */
export const ChannelStandingSchema = z.object({
  channelState: z.object({ channelId: z.string().regex(/^0x[0-9a-fA-F]{64}$/), chargedCumulativeAmount: z.string().regex(/^\d{1,39}$/) }).loose(),
}).loose();
