// Type-aware lint: the async contract (no floating or misused promises) is the point of this file.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import globals from 'globals';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', '.build-*/**', 'proto/gen/**', 'src/dashboard/web/vendor/**', 'test-output/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: { allowDefaultProject: ['*.js', '*.cjs', '.*.cjs'] }, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // node:test's describe()/test() return promises on Node 20 that the runner itself awaits.
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          allowForKnownSafeCalls: [
            {
              from: 'package',
              package: 'node:test',
              name: ['describe', 'test', 'it', 'suite', 'before', 'after', 'beforeEach', 'afterEach'],
            },
          ],
        },
      ],
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: { arguments: false } }],
      '@typescript-eslint/await-thenable': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-restricted-syntax': [
        'error',
        { selector: "MemberExpression[object.name='describe'][property.name='only']", message: '.only is banned' },
        { selector: "MemberExpression[object.name='it'][property.name='only']", message: '.only is banned' },
        { selector: "MemberExpression[object.name='test'][property.name='only']", message: '.only is banned' },
        { selector: "Property[key.name='only'][value.value=true]", message: '{only: true} is banned' },
      ],
      eqeqeq: ['error', 'always'],
      'no-restricted-properties': [
        'error',
        {
          object: 'process',
          property: 'env',
          message: 'Configuration is parsed once in src/config and passed down; do not read process.env here.',
        },
      ],
    },
  },
  {
    // The places allowed to read the environment: the config loader, the set-up script, the agent's and the
    // CLI's own config parsers (separate binaries), and tests/benchmarks (which build environments for children).
    files: ['src/config/**', 'src/setup/**', 'src/guest-agent/config.ts', 'src/cli/config.ts', 'src/bin/**', 'test/**', 'native-bench/**'],
    rules: { 'no-restricted-properties': 'off' },
  },
  {
    files: ['**/*.js', '**/*.mjs', '**/*.cjs'],
    ...tseslint.configs.disableTypeChecked,
  },
  {
    files: ['**/*.js', '**/*.mjs', '**/*.cjs'],
    languageOptions: { globals: { ...globals.node } },
  },
  {
    files: ['test/**/*.ts', 'native-bench/**/*.ts'],
    rules: {
      '@typescript-eslint/no-non-null-assertion': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
    },
  },
);
