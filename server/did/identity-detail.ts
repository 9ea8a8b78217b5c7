import type { IdentityDoc } from '../identities/identity-model.js';
import type { DidService } from './did-service.js';

/** whoami and the platform view show the identity's DID and where its document is published. */
export const didDetail = (did: DidService) => (identity: IdentityDoc) => ({
  did: did.didOf(identity._id),
  didDocumentUrl: did.documentUrlOf(identity._id),
});
