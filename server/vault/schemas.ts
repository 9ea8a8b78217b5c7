import { z } from 'zod';
import { CREDENTIAL_TYPES } from './credential-types.js';
import { metadataRecord } from '../platform/json-input.js';

/** Path-safe, and never "." or "..", so a name can not walk anywhere once it is put into a URL. */
export const credentialName = z.string()
  .regex(/^[A-Za-z0-9._-]{1,128}$/, 'must be 1-128 characters from A-Z, a-z, 0-9, dot, dash and underscore')
  .refine((n) => n !== '.' && n !== '..', 'must not be "." or ".."');

/** Metadata is stored in the clear (it is what the list shows): labels, not secrets. */
export const credentialMetadata = metadataRecord.optional();

export const putCredentialBody = z.object({
  type: z.enum(CREDENTIAL_TYPES),
  data: z.unknown().optional(),
  metadata: credentialMetadata,
  expiresAt: z.iso.datetime({ offset: true }).transform((v) => new Date(v)).nullable().optional(),
}).strict();

export const nameParams = z.object({ name: credentialName });
