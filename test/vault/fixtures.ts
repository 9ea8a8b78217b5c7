/** One valid `data` per credential type, with secrets distinctive enough to search the raw database for. */
export const TOTP_SEED = 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP';

export const SAMPLES: Record<string, { data: Record<string, unknown>; secrets: string[] }> = {
  LOGIN: { data: { username: 'agent@example.com', password: 'hunter2-login-Secret!', url: 'https://example.com/login' }, secrets: ['hunter2-login-Secret!'] },
  API_KEY: { data: { apiKey: 'sk_live_apikeySECRET_0123456789', baseUrl: 'https://api.example.com' }, secrets: ['sk_live_apikeySECRET_0123456789'] },
  OAUTH: { data: { accessToken: 'ya29.oauthACCESS-secret', refreshToken: '1//oauthREFRESH-secret', tokenType: 'Bearer', clientSecret: 'oauthCLIENT-secret' }, secrets: ['ya29.oauthACCESS-secret', '1//oauthREFRESH-secret', 'oauthCLIENT-secret'] },
  TOTP: { data: { secret: TOTP_SEED, issuer: 'Example', accountName: 'agent@example.com', backupCodes: ['backup-aaaa-1111', 'backup-bbbb-2222'] }, secrets: [TOTP_SEED, 'backup-aaaa-1111', 'backup-bbbb-2222'] },
  SSH_KEY: { data: { privateKey: '-----BEGIN OPENSSH PRIVATE KEY-----\nsshPRIVATEsecretMaterial\n-----END OPENSSH PRIVATE KEY-----', passphrase: 'ssh-pass-secret' }, secrets: ['sshPRIVATEsecretMaterial', 'ssh-pass-secret'] },
  DATABASE: { data: { host: 'db.example.com', port: 5432, database: 'app', username: 'app', password: 'db-password-secret' }, secrets: ['db-password-secret'] },
  SMTP: { data: { host: 'smtp.example.com', port: 587, username: 'mailer', password: 'smtp-password-secret', secure: false }, secrets: ['smtp-password-secret'] },
  AWS: { data: { accessKeyId: 'AKIAIOSFODNN7EXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYawsSECRET', region: 'eu-west-1' }, secrets: ['wJalrXUtnFEMI/K7MDENG/bPxRfiCYawsSECRET'] },
  CERTIFICATE: { data: { certificate: '-----BEGIN CERTIFICATE-----\nMIIcert\n-----END CERTIFICATE-----', privateKey: '-----BEGIN PRIVATE KEY-----\ncertKEYsecretMaterial\n-----END PRIVATE KEY-----' }, secrets: ['certKEYsecretMaterial'] },
  CARD: { data: { number: '4242 4242 4242 4242', expiry: '12/30', cvc: '737', holderName: 'Agent Smith' }, secrets: ['4242424242424242', '4242 4242 4242 4242', '"737"'] },
  SHIPPING_ADDRESS: { data: { name: 'Agent Smith', line1: '1 Secret Lane 42b', city: 'Utrecht', postalCode: '3511AB', country: 'NL' }, secrets: ['1 Secret Lane 42b'] },
  CUSTOM: { data: { anything: 'custom-secret-value', nested: { deep: 'custom-nested-secret' } }, secrets: ['custom-secret-value', 'custom-nested-secret'] },
};
