import { randomBytes, randomInt } from 'node:crypto';

const ALNUM = 'abcdefghijklmnopqrstuvwxyz0123456789';

export const randomHex = (bytes: number) => randomBytes(bytes).toString('hex');
export const randomAlnum = (length: number) => Array.from({ length }, () => ALNUM[randomInt(ALNUM.length)]).join('');

export const newUserId = () => `user_${randomAlnum(24)}`;
export const newOrgId = () => `org_${randomAlnum(24)}`;
/** SPEC 2.1: `id-` followed by 16 hex characters. */
export const newIdentityId = () => `id-${randomHex(8)}`;
/** SPEC 2.1: `thd_` followed by 16 hex characters. */
export const newThreadId = () => `thd_${randomHex(8)}`;
export const newId = (prefix: string) => `${prefix}_${randomAlnum(24)}`;
