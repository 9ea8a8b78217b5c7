import type { Facilitator, RedeemRequest, RedeemResult } from '../../middleware/facilitator.js';
import type { PaywallRequest } from '../../middleware/paywall.js';
import type { SellerSettings } from 'agentgate-x402-wire';

export const PAY_TO = '0x1111111111111111111111111111111111111111';
export const LOCAL_TOKEN = '0x5FbDB2315678afecb367f032d93F642f64180aa3';

export const anvilSettings: SellerSettings = {
  network: 'anvil',
  chainId: 31337,
  asset: LOCAL_TOKEN,
  payTo: PAY_TO,
  assetName: 'USD Coin',
  assetVersion: '2',
};

/** The v2 PaymentRequirements the Paywall offers for a $0.01 route under anvilSettings. */
export const anvilRequirementV2 = {
  scheme: 'exact',
  network: 'eip155:31337',
  amount: '10000',
  asset: LOCAL_TOKEN,
  payTo: PAY_TO,
  maxTimeoutSeconds: 60,
  extra: { name: 'USD Coin', version: '2' },
};

export const baseSepoliaSettings: SellerSettings = {
  network: 'base-sepolia',
  chainId: 84532,
  asset: '0x036CbD53842c5426634e7929541eC2318f3dCF7e',
  payTo: PAY_TO,
  assetName: 'USDC',
  assetVersion: '2',
};

export function request(url: string, init: Partial<PaywallRequest> = {}): PaywallRequest {
  return { method: 'GET', url, host: 'shop.example', protocol: 'https', headers: {}, ...init };
}

/** A Facilitator of our own interface that records calls and answers what the test says. */
export class FakeFacilitator implements Facilitator {
  readonly calls: RedeemRequest[] = [];
  constructor(private readonly answer: (request: RedeemRequest) => Promise<RedeemResult> | RedeemResult = okAnswer) {}
  async redeem(request: RedeemRequest): Promise<RedeemResult> {
    this.calls.push(request);
    return this.answer(request);
  }
}

export function okAnswer(): RedeemResult {
  return {
    ok: true,
    paymentId: 'pay_123',
    paymentResponse: {
      success: true,
      transaction: '0x' + 'ab'.repeat(32),
      network: 'anvil',
      payer: '0x2222222222222222222222222222222222222222',
    },
  };
}

export function b64(value: unknown): string {
  return Buffer.from(JSON.stringify(value)).toString('base64');
}

export function fromB64(value: string): unknown {
  return JSON.parse(Buffer.from(value, 'base64').toString('utf8'));
}
