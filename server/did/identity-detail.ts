import type { Config } from '../platform/config.js';
import type { IdentityDoc } from '../identities/identity-model.js';
import { identityDid } from './did-document.js';

/** whoami and the platform view show the identity's DID and where its document is published. */
export const didDetail = (config: Config) => (identity: IdentityDoc) => ({
  did: identityDid(config.DID_DOMAIN, identity._id),
  didDocumentUrl: `${config.BASE_URL}/identities/${identity._id}/did.json`,
});
