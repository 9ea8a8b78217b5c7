import { randomInt } from 'node:crypto';
import { randomAlnum } from '../platform/ids.js';

const ADJECTIVES = ['brave', 'calm', 'clever', 'eager', 'gentle', 'happy', 'keen', 'lively', 'merry', 'nimble', 'proud', 'quick', 'quiet', 'swift', 'witty', 'bold', 'bright', 'cosmic', 'daring', 'fancy', 'glad', 'humble', 'jolly', 'kind', 'lucky', 'mellow', 'noble', 'polite', 'rapid', 'sunny', 'tidy', 'vivid'];
const COLORS = ['amber', 'azure', 'coral', 'crimson', 'cyan', 'golden', 'indigo', 'ivory', 'jade', 'lilac', 'maroon', 'olive', 'onyx', 'pearl', 'ruby', 'sage', 'scarlet', 'silver', 'teal', 'violet', 'copper', 'cobalt', 'emerald', 'plum'];
const ANIMALS = ['badger', 'beaver', 'bison', 'crane', 'dolphin', 'eagle', 'falcon', 'ferret', 'fox', 'gecko', 'heron', 'ibis', 'koala', 'lemur', 'lynx', 'marmot', 'otter', 'owl', 'panda', 'puffin', 'quail', 'raven', 'seal', 'sparrow', 'tiger', 'walrus', 'wombat', 'yak', 'zebra', 'moose', 'hare', 'kestrel'];

const pick = (words: string[]) => words[randomInt(words.length)]!;

/** A three-word hyphenated slug, the default identity name (SPEC 2.3). */
export const randomSlug = () => `${pick(ADJECTIVES)}-${pick(COLORS)}-${pick(ANIMALS)}`;

/** `<slug>-<5 alphanumerics>@{mail_domain}` (SPEC 2.1). Uniqueness is enforced by the database index. */
export const inboxAddress = (slug: string, mailDomain: string) => `${slug}-${randomAlnum(5)}@${mailDomain}`;
