import { z } from 'zod';
import { toolDefiner, ToolRefusal, type ToolDefinition } from '../platform/mcp-tool.js';
import { activityQuery, channelIdParam, mandateBody, mandateIdParam, payBody } from './schemas.js';
import { activityFor, createMandateFor, getMandateFor, listChannelsFor, listMandatesFor, payFor, refundChannelFor, revokeMandateFor, withdrawChannelFor, type BuyerDeps } from './calls.js';
import { refusalBody } from './pay-result.js';

const ownerOf = (principal: { orgId: string; identityId: string }) => ({ orgId: principal.orgId, identityId: principal.identityId });

const defineTool = toolDefiner<BuyerDeps>();

/**
 * MCP tools of the buyer side, each the HTTP route's call with the route's schema and scope: an agent
 * that only speaks MCP can set up its mandate, pay and read what it paid without any HTTP of its own.
 */
export const buyerTools: ToolDefinition<BuyerDeps>[] = [
  defineTool({
    name: 'payments_create_mandate',
    title: 'Create a spending mandate',
    description:
      'Allows payments_pay to spend from this identity\'s wallet: at most maxPerCallUsdc per payment and dailyCapUsdc per UTC day ' +
      '(USDC amounts as decimal strings, e.g. "0.10"), until validUntil (ISO 8601 with offset), optionally only to allowedHosts ' +
      '(e.g. ["api.example.com", "*.example.org"]). Same as POST /v0/payments/mandates.',
    scope: 'payments:spend',
    input: mandateBody,
    run: (deps, principal, input) => createMandateFor(deps, ownerOf(principal), input),
  }),
  defineTool({
    name: 'payments_list_mandates',
    title: 'List spending mandates',
    description: 'This identity\'s mandates, newest first, each with what it spent today and in total. Same as GET /v0/payments/mandates.',
    scope: 'payments:read',
    input: z.object({}).strict(),
    run: (deps, principal) => listMandatesFor(deps, ownerOf(principal)),
  }),
  defineTool({
    name: 'payments_get_mandate',
    title: 'Get a spending mandate',
    description: 'One mandate by its id (the mandateId, "mdt_…"), with what it spent. Same as GET /v0/payments/mandates/{id}.',
    scope: 'payments:read',
    input: mandateIdParam,
    run: (deps, principal, input) => getMandateFor(deps, ownerOf(principal), input.id),
  }),
  defineTool({
    name: 'payments_revoke_mandate',
    title: 'Revoke a spending mandate',
    description: 'Revokes a mandate by its id (the mandateId, "mdt_…"): payments_pay no longer spends under it. Same as DELETE /v0/payments/mandates/{id}.',
    scope: 'payments:spend',
    input: mandateIdParam,
    run: (deps, principal, input) => revokeMandateFor(deps, ownerOf(principal), input.id),
  }),
  defineTool({
    name: 'payments_pay',
    title: 'Pay for an x402 URL',
    description:
      'Fetches a URL; if it answers 402 Payment Required (x402), pays it in USDC from this identity\'s wallet ' +
      'under its spending mandate (see payments_create_mandate) and returns the paid response. Non-402 answers come back as they are (paid: false). ' +
      'Use maxAmountUsdc to refuse prices above a limit, dryRun to see the price without paying. ' +
      'Usage-priced sellers (x402 upto: a maximum, of which the seller charges what the call used, e.g. LLM tokens) are paid too: ' +
      'caps and maxAmountUsdc judge the maximum, cost.amountUsdc is what was charged. ' +
      'Payment channels (x402 batch-settlement) are preferred above all: the first call deposits a few calls\' worth (within the mandate\'s daily cap) into a channel, ' +
      'later calls pay with a signed voucher and send no transaction; cost.channel says where the channel stands (see payments_list_channels). ' +
      'Escrowed offers (x402 auth-capture: captured only if the seller served the request, refundable) come next; cost.escrow says what became of it ' +
      '(captured, voided: nothing charged), and a later refund gives the mandate back what it had counted. ' +
      'A refusal (no mandate, over a cap, balance short, …) is a tool error whose `error` names the reason.',
    scope: 'payments:spend',
    input: payBody,
    async run(deps, principal, input) {
      const result = await payFor(deps, ownerOf(principal), input);
      // A refusal is an error to the model (nothing was paid), with the same body POST /v0/payments/pay answers.
      return result.ok ? result : new ToolRefusal(refusalBody(result));
    },
  }),
  defineTool({
    name: 'payments_list_channels',
    title: 'List payment channels',
    description:
      'This identity\'s payment channels (x402 batch-settlement), each with what was deposited, what its calls charged, what the seller claimed, ' +
      'the balance left and what came back to the wallet (a seller refunds an idle channel\'s remainder). Same as GET /v0/wallet/channels.',
    scope: 'payments:read',
    input: z.object({}).strict(),
    run: (deps, principal) => listChannelsFor(deps, ownerOf(principal)),
  }),
  defineTool({
    name: 'payments_refund_channel',
    title: 'Take a payment channel\'s remainder back',
    description:
      'Asks the seller of one of this identity\'s payment channels (id: the channelId from payments_list_channels) to give back what its calls did not use ' +
      '(the x402 batch-settlement cooperative refund): the seller claims what the calls charged and refunds the rest to the wallet in one transaction. ' +
      'Same as POST /v0/wallet/channels/{id}/refund.',
    scope: 'payments:spend',
    input: channelIdParam,
    async run(deps, principal, input) {
      const result = await refundChannelFor(deps, ownerOf(principal), input.id);
      return result.ok ? result : new ToolRefusal(refusalBody(result));
    },
  }),
  defineTool({
    name: 'payments_withdraw_channel',
    title: 'Withdraw a payment channel without its seller',
    description:
      'Starts the timed withdrawal (x402 batch-settlement) of one of this identity\'s payment channels (id: the channelId from payments_list_channels) ' +
      'whose seller does not refund it (payments_refund_channel refused, or the seller is gone): what the channel holds above what the accepted calls charged ' +
      'comes back to the wallet once the channel\'s withdraw delay has passed (finalizableAt; finished automatically). Until then payments_pay does not pay through the channel. ' +
      'Same as POST /v0/wallet/channels/{id}/withdraw.',
    scope: 'payments:spend',
    input: channelIdParam,
    run: (deps, principal, input) => withdrawChannelFor(deps, ownerOf(principal), input.id),
  }),
  defineTool({
    name: 'payments_list_activity',
    title: 'List payment activity',
    description:
      'This identity\'s payments, newest first: what it paid (direction "out", with txHash and the seller\'s receipt when one came) and what its org received. ' +
      'Pass nextPageToken back as pageToken for the next page. Same as GET /v0/payments/activity.',
    scope: 'payments:read',
    input: activityQuery,
    run: (deps, principal, input) => activityFor(deps, ownerOf(principal), input),
  }),
];
