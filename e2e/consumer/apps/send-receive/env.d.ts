/// <reference types="vite/client" />

interface ImportMetaEnv {
  readonly VITE_PKG_URL: string;
  readonly VITE_CRYPTIFY_URL: string;
}
