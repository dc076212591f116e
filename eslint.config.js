// Lint: typescript-eslint's strict set, plus the size limits the project keeps in src/ and
// test/ alike (CONTRIBUTING.md, "Code rules"; docs/architecture.md, "Writing a backend"): no
// file over ~450 lines, no function over ~60.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'test/**/*.java', '.servers/**'] },
  js.configs.recommended,
  ...tseslint.configs.strict,
  {
    languageOptions: {
      ecmaVersion: 2023,
      sourceType: 'module',
      globals: {
        process: 'readonly',
        console: 'readonly',
        Buffer: 'readonly',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
        setInterval: 'readonly',
        clearInterval: 'readonly',
        setImmediate: 'readonly',
        performance: 'readonly',
        AbortController: 'readonly',
        AbortSignal: 'readonly',
        URL: 'readonly',
        URLSearchParams: 'readonly',
      },
    },
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_' },
      ],
      '@typescript-eslint/no-non-null-assertion': 'off',
      'no-empty': ['error', { allowEmptyCatch: true }],
    },
  },
  {
    files: ['src/**/*.ts', 'test/**/*.ts', 'bench/**/*.ts', 'scripts/**/*.ts'],
    rules: {
      'max-lines': ['error', { max: 450, skipBlankLines: true, skipComments: true }],
      'max-lines-per-function': ['error', { max: 60, skipBlankLines: true, skipComments: true, IIFEs: true }],
    },
  },
  {
    files: ['src/**/*.ts'],
    rules: {
      '@typescript-eslint/no-non-null-assertion': 'error',
    },
  },
  {
    // Written before the limits reached tests and the server harness: their long \`describe\`
    // bodies and start functions are split by the engineers who own them. Warnings, so that
    // \`npm run lint\` shows them; take a file off this list once it is within the limits.
    files: [
      'scripts/servers/cassandra.ts',
      'scripts/servers/etcd.ts',
      'scripts/servers/mariadb.ts',
      'scripts/servers/postgres.ts',
      'scripts/servers/redis-sentinel.ts',
      'scripts/servers/redis.ts',
      'scripts/servers/zookeeper.ts',
      'test/cassandra/fair.test.ts',
      'test/etcd/etcdctl.test.ts',
      'test/mysql/mysql.test.ts',
      'test/postgres/postgres.test.ts',
      'test/redis/handoff.test.ts',
      'test/redis/redis.test.ts',
      'test/sql/cases.ts',
      'test/zookeeper/kinds.test.ts',
      'test/zookeeper/zookeeper.test.ts',
    ],
    rules: {
      'max-lines': ['warn', { max: 450, skipBlankLines: true, skipComments: true }],
      'max-lines-per-function': ['warn', { max: 60, skipBlankLines: true, skipComments: true, IIFEs: true }],
    },
  },
);
