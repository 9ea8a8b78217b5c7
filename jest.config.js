// ESM all the way: several dependencies (@noble/ed25519 3.x, agenda 6) ship only ES modules, so jest
// runs under --experimental-vm-modules (see the "test" script) and swc compiles our TypeScript to ESM.
export default {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  transform: {
    '^.+\\.ts$': ['@swc/jest', {
      jsc: { parser: { syntax: 'typescript' }, target: 'es2022' },
      module: { type: 'es6' },
    }],
  },
  // Our sources import siblings as "./x.js" (NodeNext); jest resolves the .ts file behind it.
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  testMatch: ['<rootDir>/test/**/*.test.ts'],
  globalSetup: '<rootDir>/test/support/global-setup.mjs',
  // The machine as a shared resource: a load test of several OS processes (test/cluster/) runs alone.
  setupFilesAfterEnv: ['<rootDir>/test/support/machine-share.ts'],
  globalTeardown: '<rootDir>/test/support/global-teardown.mjs',
  reporters: ['default', '<rootDir>/test/support/summary-reporter.cjs'],
  testTimeout: 60000,
  maxWorkers: 2,
};
