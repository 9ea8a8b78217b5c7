import { z } from 'zod';
import { toolDefiner, type ToolDefinition } from '../platform/mcp-tool.js';
import type { WalletService } from './wallet-service.js';

export interface WalletToolDeps {
  wallets: WalletService;
}

const defineTool = toolDefiner<WalletToolDeps>();

/** The wallet's MCP tool. (The dev faucet's tool, wallet_faucet, lives with the faucet in server/dev/faucet.ts.) */
export const walletTools: ToolDefinition<WalletToolDeps>[] = [
  defineTool({
    name: 'wallet_get',
    title: 'Get the wallet',
    description: 'This identity\'s USDC smart-account wallet: address, network, whether it is deployed, and its balance. Same as GET /v0/wallet.',
    scope: 'wallet:read',
    input: z.object({}).strict(),
    run: ({ wallets }, principal) => wallets.view({ orgId: principal.orgId, identityId: principal.identityId }),
  }),
];
