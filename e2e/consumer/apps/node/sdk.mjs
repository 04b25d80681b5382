// A Node app using the installed SDK and the library: seal for Bob, open again, and the SDK's API.
import { PostGuard, RecipientBuilder, SDK_VERSION } from '@postguard-ts/sdk';
import { seal, Unsealer } from 'postguard-ts';
import { extractSigningKey, extractUsk, generateKemKeys, generateSigningKeys } from 'postguard-ts/keys';

const EMAIL = 'pbdf.sidn-pbdf.email.email';
const kem = generateKemKeys();
const ibs = generateSigningKeys();
const alice = { ts: 1_700_000_000, con: [{ t: EMAIL, v: 'alice@example.com' }] };
const bob = { ts: 1_700_000_000, con: [{ t: EMAIL, v: 'bob@example.com' }] };
const sealed = await seal(
  kem.mpk,
  { policy: { bob }, pubSignKey: { key: extractSigningKey(ibs.sk, alice), policy: alice } },
  new TextEncoder().encode('hi from node'),
);
const [plain, verified] = await (await Unsealer.new(sealed, ibs.vk)).unseal('bob', extractUsk(kem.msk, bob));
const client = new PostGuard({ pkgUrl: 'https://pkg.example.org', storageUrl: 'https://storage.example.org' });
console.log(
  JSON.stringify({
    plain: new TextDecoder().decode(plain),
    sender: verified.public.con[0].v,
    sdk:
      typeof PostGuard === 'function' && typeof RecipientBuilder === 'function' && typeof client.encrypt === 'function',
    version: SDK_VERSION,
  }),
);
