// The web platform's types that the library's declarations name, typed by shape: the DOM library's
// `HeadersInit`, `RequestCredentials`, `Element` and `FileList` do not exist in a Node project
// without it (`lib: ["es2022"]`, `types: ["node"]`), and a published .d.ts naming them fails there
// under `skipLibCheck: false` (`npm run check:packages` type-checks such a project). The DOM's own
// values are assignable to each.

/**
 * Request headers as `fetch` takes them: a record, `[name, value]` pairs or a `Headers`. Typed by
 * shape, not as the DOM's `HeadersInit`, so that the declarations type-check in a Node project
 * without the DOM library.
 */
export type RequestHeaders = Readonly<Record<string, string>> | Iterable<readonly [string, string]>;

/** `fetch`'s `credentials` mode, typed without the DOM library (its `RequestCredentials`). */
export type CredentialsMode = 'omit' | 'same-origin' | 'include';

/** The `Headers` of `init`: what `new Headers(init)` does, for our structural {@link RequestHeaders}. */
export const toHeaders = (init: RequestHeaders | undefined): Headers =>
  // The Fetch standard takes any iterable of pairs (a WebIDL sequence), which the DOM's HeadersInit narrows to arrays.
  new Headers(init as ConstructorParameters<typeof Headers>[0]);

/**
 * An element of the page (a DOM `Element`: where the Yivi QR code is shown), typed by shape so that
 * the declarations need no DOM library.
 */
export interface ElementLike {
  /** The element's tag name. */
  readonly tagName: string;
  /** Replaces the element's children. */
  replaceChildren(...nodes: never[]): void;
}

/** A `FileList` (an `<input type="file">`'s `files`), typed by shape. */
export interface FileListLike {
  /** How many files. */
  readonly length: number;
  /** The file at `index`, or null. */
  item(index: number): File | null;
  /** The file at `index`. */
  readonly [index: number]: File;
}

/** A WebCrypto key, by shape (a page's CryptoKey and Node's webcrypto.CryptoKey both fit). */
export interface CryptoKeyLike {
  readonly algorithm: { readonly name: string };
  readonly extractable: boolean;
  readonly type: string;
  readonly usages: readonly string[];
}
