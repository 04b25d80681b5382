/** This SDK's version, sent in X-POSTGUARD-CLIENT-VERSION. Kept equal to package.json's (a test checks). */
export const SDK_VERSION = '0.1.0';

/** The client name in X-POSTGUARD-CLIENT-VERSION (pg-js sends `pg-js`, the .NET SDK `pg-dotnet`). */
export const SDK_CLIENT_NAME = 'postguard-ts';
