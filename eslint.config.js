// ESLint: the type-aware rules that catch what hangs a stream (a promise nobody awaits or
// handles, a promise where a callback's return value is ignored), and the regular-expression
// rules, on every TypeScript file. Formatting is not ESLint's job here.
//
// The two super-linear rules are errors everywhere, tests included: a pattern that backtracks
// super-linearly on some input turns untrusted bytes into minutes of CPU (an e-mail trim once took
// 25 minutes on a 1 MiB run of spaces).
import regexp from 'eslint-plugin-regexp';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      '**/dist/**',
      '**/node_modules/**',
      'test-results/**',
      'playwright-report/**',
      'tmp/**',
      'e2e/consumer/apps/**',
      'docs/api/**',
    ],
  },
  {
    files: ['**/*.ts'],
    languageOptions: {
      parser: tseslint.parser,
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    plugins: { '@typescript-eslint': tseslint.plugin },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
    },
  },
  {
    files: ['**/*.ts'],
    ...regexp.configs['flat/recommended'],
    rules: {
      ...regexp.configs['flat/recommended'].rules,
      'regexp/no-super-linear-backtracking': 'error',
      'regexp/no-super-linear-move': 'error',
    },
  },
  {
    // Tests match terminal output, escape sequences included, on purpose.
    files: ['**/*.test.ts', '**/*.spec.ts'],
    rules: { 'no-control-regex': 'off' },
  },
);
