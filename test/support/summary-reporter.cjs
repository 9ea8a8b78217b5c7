// Writes jest's aggregated counts to .jest-report.json so .ci/run can print "N passed, M failed"
// while CI runs exactly `npm test`, the README's command.
const { writeFileSync } = require('node:fs');

class SummaryReporter {
  onRunComplete(_contexts, results) {
    const summary = {
      numPassedTests: results.numPassedTests,
      numFailedTests: results.numFailedTests,
      numPendingTests: results.numPendingTests,
      numTotalTests: results.numTotalTests,
      numFailedTestSuites: results.numFailedTestSuites,
      numRuntimeErrorTestSuites: results.numRuntimeErrorTestSuites,
      success: results.success,
    };
    writeFileSync('.jest-report.json', JSON.stringify(summary, null, 2));
  }
}
module.exports = SummaryReporter;
