// CommonJS all the way: jest's ES-module mode (--experimental-vm-modules) keeps every test file's modules
// alive after the file ends, so a worker grew until it ran out of memory (test/support/jest-transform.cjs
// says how it was measured). swc compiles our TypeScript, and the dependencies that ship only ES modules,
// to CommonJS; the other dependencies load as they are.
export default {
  // Node's, and a test file's timers end with the file (test/support/test-environment.cjs says why).
  testEnvironment: '<rootDir>/test/support/test-environment.cjs',
  transform: { '^.+\\.(ts|js|mjs)$': '<rootDir>/test/support/jest-transform.cjs' },
  // node_modules too: the transform compiles only packages of ES modules ("type": "module", .mjs).
  transformIgnorePatterns: [],
  // Our sources import siblings as "./x.js" (NodeNext); jest resolves the .ts file behind it.
  // The wire package from its sources, as tsconfig.json's paths has it.
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1', '^agentgate-x402-wire$': '<rootDir>/packages/x402-wire/src/index.ts' },
  testMatch: ['<rootDir>/test/**/*.test.ts'],
  globalSetup: '<rootDir>/test/support/global-setup.mjs',
  // The machine as a shared resource: a load test of several OS processes (test/cluster/) runs alone.
  setupFilesAfterEnv: ['<rootDir>/test/support/machine-share.ts'],
  globalTeardown: '<rootDir>/test/support/global-teardown.mjs',
  reporters: ['default', '<rootDir>/test/support/summary-reporter.cjs'],
  testTimeout: 60000,
  maxWorkers: 2,
};
