import type { CDPSession } from '@playwright/test';

/**
 * A platform authenticator in Chromium over the DevTools protocol, as the passkey tier needs one:
 * resident keys, user verification that succeeds, presence given without a prompt, and the PRF
 * extension unless `hasPrf` is false. Call `WebAuthn.enable` on the session first. Its id, for
 * `WebAuthn.removeVirtualAuthenticator`.
 */
export async function addVirtualAuthenticator(cdp: CDPSession, hasPrf = true): Promise<string> {
  const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
    options: {
      protocol: 'ctap2',
      ctap2Version: 'ctap2_1',
      transport: 'internal',
      hasResidentKey: true,
      hasUserVerification: true,
      isUserVerified: true,
      hasPrf,
      automaticPresenceSimulation: true,
    },
  });
  return authenticatorId;
}
