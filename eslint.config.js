// ESLint over the whole tree: typescript-eslint's recommended rules; formatting is Prettier's job.
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';

export default tseslint.config({ ignores: ['dist/', 'node_modules/', 'data/', '.tap/'] }, js.configs.recommended, ...tseslint.configs.recommended, prettier, {
  languageOptions: {
    globals: {
      process: 'readonly',
      console: 'readonly',
      Buffer: 'readonly',
      URL: 'readonly',
      setTimeout: 'readonly',
      clearTimeout: 'readonly',
      setInterval: 'readonly',
      clearInterval: 'readonly',
      fetch: 'readonly',
      performance: 'readonly',
      AbortController: 'readonly',
      AbortSignal: 'readonly',
      structuredClone: 'readonly',
      TextEncoder: 'readonly',
      TextDecoder: 'readonly',
      URLSearchParams: 'readonly',
      setImmediate: 'readonly',
      queueMicrotask: 'readonly',
    },
  },
  rules: {
    // Unused parameters kept for a signature's sake are prefixed with _.
    '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none', ignoreRestSiblings: true }],
  },
});
