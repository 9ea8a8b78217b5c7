import dns2 from 'dns2';
import { freePort } from '../../server/platform/net.js';

const { Packet } = dns2;

type RecordType = 'TXT' | 'A' | 'MX';

/**
 * A real DNS server on loopback (UDP and TCP, dns2) serving the test world's records: SPF, DKIM and DMARC
 * of test domains. `fallbackSpf` answers the TXT query of any name without records of its own (not
 * `_dmarc.` or `._domainkey.` names) with an SPF record, so the domains tests mail from without a zone of
 * their own authorize the loopback host that delivers their mail. `fail(name)` makes a name answer SERVFAIL
 * (a DNS outage for that name); `records` and the fallback can change between tests.
 */
export interface TestDns {
  /** `127.0.0.1:<port>`, as MAIL_DNS_SERVERS takes it. */
  server: string;
  set(name: string, type: RecordType, values: string[]): void;
  fail(name: string): void;
  clear(): void;
  fallbackSpf: string | null;
  queries: string[];
  close(): Promise<void>;
}

export async function startTestDns(options: { fallbackSpf?: string | null } = {}): Promise<TestDns> {
  const zone = new Map<string, Map<RecordType, string[]>>();
  const failing = new Set<string>();
  const state = { fallbackSpf: options.fallbackSpf === undefined ? 'v=spf1 ip4:127.0.0.1 -all' : options.fallbackSpf };
  const queries: string[] = [];
  const server = dns2.createServer({
    udp: true,
    tcp: true,
    handle(request, send) {
      const response = Packet.createResponseFromRequest(request);
      const question = request.questions[0];
      if (!question) return send(response);
      const name = question.name.toLowerCase().replace(/\.$/, '');
      const type = Object.entries(Packet.TYPE).find(([, code]) => code === question.type)?.[0] as RecordType | undefined;
      queries.push(`${type ?? question.type} ${name}`);
      if (failing.has(name)) {
        response.header.rcode = Packet.RCODE.SERVFAIL;
        return send(response);
      }
      const records = zone.get(name);
      let values = type ? records?.get(type) : undefined;
      if (!records && type === 'TXT' && state.fallbackSpf && !name.startsWith('_dmarc.') && !name.includes('._domainkey.')) values = [state.fallbackSpf];
      if (!records && !values) response.header.rcode = Packet.RCODE.NXDOMAIN;
      for (const value of values ?? []) {
        if (type === 'TXT') {
          // One character-string is at most 255 octets: a long record (a DKIM key) is split into several.
          const chunks = value.match(/.{1,255}/gs) ?? [''];
          response.answers.push({ name: question.name, type: Packet.TYPE.TXT, class: Packet.CLASS.IN, ttl: 60, data: chunks } as never);
        } else if (type === 'A') {
          response.answers.push({ name: question.name, type: Packet.TYPE.A, class: Packet.CLASS.IN, ttl: 60, address: value } as never);
        } else if (type === 'MX') {
          response.answers.push({ name: question.name, type: Packet.TYPE.MX, class: Packet.CLASS.IN, ttl: 60, exchange: value, priority: 10 } as never);
        }
      }
      send(response);
    },
  });
  // UDP and TCP on one port: a resolver asks again over TCP on the same port when an answer is truncated.
  let udpPort = 0;
  for (let attempt = 1; ; attempt++) {
    udpPort = await freePort();
    try {
      await server.listen({ udp: { port: udpPort, address: '127.0.0.1' }, tcp: { port: udpPort, address: '127.0.0.1' } });
      // A test that stops its backend by hand (not through TestServer.stop) leaves this server open: it must
      // not keep the test process alive after its tests (jest in band would then never exit).
      for (const socket of Object.values((server as unknown as { servers: Record<string, { unref?: () => void }> }).servers)) socket.unref?.();
      break;
    } catch (err) {
      if (attempt === 5) throw err;
    }
  }
  return {
    server: `127.0.0.1:${udpPort}`,
    set(name, type, values) {
      const key = name.toLowerCase();
      const records = zone.get(key) ?? new Map<RecordType, string[]>();
      records.set(type, values);
      zone.set(key, records);
    },
    fail(name) { failing.add(name.toLowerCase()); },
    clear() { zone.clear(); failing.clear(); },
    get fallbackSpf() { return state.fallbackSpf; },
    set fallbackSpf(value) { state.fallbackSpf = value; },
    queries,
    close: () => server.close(),
  };
}
