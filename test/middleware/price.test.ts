import { formatUsdc, InvalidPriceError, parsePrice } from 'agentgate-x402-wire';

describe('parsePrice', () => {
  test.each<[Parameters<typeof parsePrice>[0], bigint]>([
    ['$0.01', 10_000n],
    ['0.01', 10_000n],
    ['$1', 1_000_000n],
    ['1.5', 1_500_000n],
    ['0.000001', 1n],
    ['$0.1', 100_000n],
    ['  $2.50  ', 2_500_000n],
    ['0.01 USDC', 10_000n],
    ['$ 3 usd', 3_000_000n],
    ['10000 atomic', 10_000n],
    ['1 ATOMIC', 1n],
    [{ atomic: '10000' }, 10_000n],
    [{ atomic: 42n }, 42n],
    [0.01, 10_000n],
    [0.1, 100_000n],
    [3, 3_000_000n],
    ['1000000000', 1_000_000_000_000_000n],
  ])('%p -> %p', (input, expected) => {
    expect(parsePrice(input)).toBe(expected);
  });

  test.each<[unknown, RegExp]>([
    ['-0.01', /negative/],
    ['$-1', /decimal USDC amount/],
    ['0', /greater than zero/],
    ['$0.000000', /greater than zero/],
    [{ atomic: '0' }, /greater than zero/],
    ['0.0000001', /6 decimals; got 7/],
    ['1.1234567', /6 decimals/],
    ['abc', /decimal USDC amount/],
    ['', /decimal USDC amount/],
    ['1,5', /decimal USDC amount/],
    ['.5', /decimal USDC amount/],
    ['1.', /decimal USDC amount/],
    ['1e-2', /decimal USDC amount/],
    ['0x10', /decimal USDC amount/],
    ['0.01USDC', /decimal USDC amount/],
    ['0.01 EUR', /decimal USDC amount/],
    ['Infinity', /decimal USDC amount/],
    [1e-7, /decimal string/],
    [Number.NaN, /finite/],
    [-1, /decimal USDC amount|negative/],
    [{ atomic: '1.5' }, /digits/],
    [{ atomic: -1n }, /negative/],
    [{ atomic: 5 }, /digits/],
    ['1000000000.000001', /exceeds/],
    [null, /expected a string/],
  ])('rejects %p', (input, message) => {
    expect(() => parsePrice(input as never)).toThrow(InvalidPriceError);
    expect(() => parsePrice(input as never)).toThrow(message);
  });
});

describe('formatUsdc', () => {
  test.each([
    [10_000n, '0.01'],
    [1_000_000n, '1'],
    [1n, '0.000001'],
    [1_500_000n, '1.5'],
    [123_456_789n, '123.456789'],
    [0n, '0'],
  ])('%p -> %p', (atomic, text) => {
    expect(formatUsdc(atomic)).toBe(text);
  });

  test('round-trips with parsePrice', () => {
    for (const atomic of [1n, 9n, 10n, 99_999n, 100_000n, 1_000_001n, 987_654_321n]) {
      expect(parsePrice(formatUsdc(atomic))).toBe(atomic);
    }
  });
});
