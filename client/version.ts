/** postguard-ts's version, sent in X-POSTGUARD-CLIENT-VERSION. Kept equal to lib/package.json's (a test checks). */
export const CLIENT_VERSION = '0.1.0';

/** The client name in X-POSTGUARD-CLIENT-VERSION (pg-js sends `pg-js`, the .NET SDK `pg-dotnet`). */
export const CLIENT_NAME = 'postguard-ts';
