import { getAddress, type Address, type PublicClient } from 'viem';

/** A contract a payment path cannot work without, at the fixed address the official SDKs expect it. */
export interface RequiredContract {
  readonly name: string;
  readonly address: Address;
}

/**
 * Which of the contracts the schemes rely on have code on this chain, asked once at start-up. A call to
 * an address without code succeeds and does nothing, so a scheme whose contracts are missing would
 * answer "settled" for money that never moved: such a scheme is refused instead (PaymentSchemes), with a
 * log line and the `agentgate_scheme_available` metric. An address the chain could not be asked about
 * (every RPC URL failed at start) counts as present: a flaky node must not turn a scheme off, and its
 * settlements would fail visibly.
 */
export class ContractCode {
  private readonly absent = new Set<string>();
  private readonly asked = new Set<string>();

  constructor(private readonly client: Pick<PublicClient, 'getCode'>) {}

  /** Asks the chain about the contracts not asked about yet (each once). Returns those it could not ask about. */
  async check(contracts: readonly RequiredContract[]): Promise<RequiredContract[]> {
    const fresh = distinct(contracts).filter((c) => !this.asked.has(key(c.address)));
    const unknown: RequiredContract[] = [];
    await Promise.all(fresh.map(async (contract) => {
      try {
        const code = await this.client.getCode({ address: contract.address });
        this.asked.add(key(contract.address));
        if (!code || code === '0x') this.absent.add(key(contract.address));
      } catch {
        unknown.push(contract);
      }
    }));
    return unknown;
  }

  /** The contracts of `contracts` found without code (each named once). */
  missing(contracts: readonly RequiredContract[]): RequiredContract[] {
    return distinct(contracts).filter((c) => this.absent.has(key(c.address)));
  }
}

const key = (address: Address) => getAddress(address);

function distinct(contracts: readonly RequiredContract[]): RequiredContract[] {
  const seen = new Set<string>();
  return contracts.filter((c) => (seen.has(key(c.address)) ? false : (seen.add(key(c.address)), true)));
}

/** "Permit2 at 0x0000…8BA3, X402UptoPermit2Proxy at 0x4020…0002": what a refusal names. */
export function describeContracts(contracts: readonly RequiredContract[]): string {
  return contracts.map((c) => `${c.name} at ${c.address}`).join(', ');
}
