import * as ed from '@noble/ed25519';
import { ed25519Signer } from '../../server/did/service-key.js';

describe('the service signing key', () => {
  it('signs receipts natively with the same bytes @noble/ed25519 makes, and they verify', async () => {
    for (let i = 0; i < 20; i++) {
      const seed = ed.utils.randomSecretKey();
      const message = new TextEncoder().encode(`{"paymentId":"pay_${i}","amountUsdcRaw":"${i * 1000}"}`);
      const signature = await ed25519Signer(seed)(message);
      expect(Buffer.from(signature).toString('hex')).toBe(Buffer.from(await ed.signAsync(message, seed)).toString('hex'));
      expect(await ed.verifyAsync(signature, message, await ed.getPublicKeyAsync(seed))).toBe(true);
    }
  });
});
