import type { ActivityLog } from '../platform/activity-log.js';
import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../platform/metrics.js';
import type { SharedVerdicts } from './shared-verdicts.js';
import { addressKey, type ScreenedNetwork, type ScreeningSource, type SourceName, type SourceVerdict } from './sources.js';

/** Whom an address is in a payment: who pays, who is paid, or the agent wallet paying out. */
export type PartyRole = 'payer' | 'payTo' | 'wallet';
export interface Party { role: PartyRole; address: string }

/** Where a screening happens: whose request (its refusals are logged to that org), on which network, through which door. */
export interface ScreeningAt { orgId: string; network: ScreenedNetwork; scheme?: string; door: string }

export interface ScreeningRefusal {
  /** sanctioned_address: a source lists it; screening_unavailable: a source could not answer and the policy refuses then. */
  reason: 'sanctioned_address' | 'screening_unavailable';
  message: string;
  role: PartyRole;
  address: string;
  source: SourceName;
}

/** What a screening source that cannot answer means: refused (the default) or allowed, the operator's choice. */
export type OnSourceError = 'refuse' | 'allow';

type Answer = { party: Party; source: SourceName; verdict?: SourceVerdict; error?: string };

const ROLE_WORDS: Record<PartyRole, string> = { payer: 'payer', payTo: 'payTo (the seller\'s address)', wallet: 'paying wallet' };

/**
 * Sanctions screening, before anything moves: every party of a payment is checked against every source
 * the operator configured (a list file, the chain's sanctions oracle, an HTTP provider), all at once. A
 * listed party refuses the payment, naming the source that listed it; a source that cannot answer
 * refuses it too unless SCREENING_ON_ERROR=allow. Each refusal is written to the org's activity log (the
 * console shows it), counted in agentgate_screening_refusals_total and logged.
 *
 * The list is in memory (a lookup costs nothing); the oracle's and the provider's verdicts are kept for a
 * while, shared by the deployment's processes (shared-verdicts.ts), so a buyer's payments after the first
 * are screened without a call.
 */
export class Screening {
  constructor(
    private readonly sources: readonly ScreeningSource[],
    private readonly verdicts: SharedVerdicts | undefined,
    private readonly onError: OnSourceError,
    private readonly deps: { logs: ActivityLog; log: Logger; metrics: Metrics },
  ) {}

  /** No sources: nothing is screened (the operator configured none). */
  get enabled(): boolean {
    return this.sources.length > 0;
  }

  get sourceNames(): SourceName[] {
    return this.sources.map((s) => s.name);
  }

  /**
   * Why these parties may not pay or be paid on this network, or undefined: they may. The message says
   * why and names the source; the caller adds what its refusal left undone ("nothing was charged").
   */
  async screen(parties: readonly Party[], at: ScreeningAt): Promise<ScreeningRefusal | undefined> {
    const sources = this.sources.filter((source) => source.covers(at.network));
    if (!sources.length) return undefined;
    const distinct = new Map<string, Party>();
    for (const party of parties) if (party.address) distinct.set(`${party.role}:${addressKey(party.address)}`, party);
    const answers = await Promise.all([...distinct.values()].flatMap((party) => sources.map((source) => this.ask(source, party, at.network))));
    const listed = answers.find((a) => a.verdict?.listed);
    if (listed) return this.refuse(at, listed, 'sanctioned_address');
    const failed = answers.find((a) => a.error !== undefined);
    if (!failed) return undefined;
    this.deps.metrics.screeningSourceErrors.inc({ source: failed.source, network: at.network.name });
    this.deps.log.warn({ source: failed.source, network: at.network.name, address: failed.party.address, err: failed.error, policy: this.onError }, `a screening source could not answer; the payment is ${this.onError === 'refuse' ? 'refused' : 'allowed'} (SCREENING_ON_ERROR=${this.onError})`);
    return this.onError === 'refuse' ? this.refuse(at, failed, 'screening_unavailable') : undefined;
  }

  /** The list is a lookup in memory; the sources that cost a call are asked through the shared verdicts. */
  private async ask(source: ScreeningSource, party: Party, network: ScreenedNetwork): Promise<Answer> {
    try {
      const verdict = source.name === 'list' || !this.verdicts
        ? await source.check(party.address, network)
        : await this.verdicts.through(`${source.name}|${network.name}|${addressKey(party.address)}`, () => source.check(party.address, network));
      return { party, source: source.name, verdict };
    } catch (err) {
      return { party, source: source.name, error: (err as Error).message };
    }
  }

  private refuse(at: ScreeningAt, answer: Answer, reason: ScreeningRefusal['reason']): ScreeningRefusal {
    const { party, source } = answer;
    const who = `the ${ROLE_WORDS[party.role]} ${party.address}`;
    const message = reason === 'sanctioned_address'
      ? `${who} is on a sanctions list this facilitator screens against (source: ${source}${answer.verdict?.detail ? `, ${answer.verdict.detail}` : ''})`
      : `${who} could not be screened (source ${source} did not answer), and this facilitator refuses what it cannot screen: try again later`;
    this.deps.metrics.screeningRefusals.inc({ reason, source, role: party.role, network: at.network.name });
    this.deps.log.warn({ orgId: at.orgId, reason, source, role: party.role, address: party.address, network: at.network.name, scheme: at.scheme, door: at.door }, 'payment refused by screening');
    this.deps.logs.recordSoon({
      orgId: at.orgId, action: 'payments.screening_refused', category: 'payments', severity: 'warning', status: 'failure', description: message,
      metadata: { reason, source, role: party.role, address: party.address, network: at.network.name, ...(at.scheme ? { scheme: at.scheme } : {}), door: at.door, ...(answer.verdict?.detail ? { detail: answer.verdict.detail } : {}) },
    });
    return { reason, message, role: party.role, address: party.address, source };
  }
}
