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
      // jest fills results.success in only after the reporters ran: derive it from the counts.
      success: results.numFailedTests === 0 && results.numFailedTestSuites === 0 && results.numRuntimeErrorTestSuites === 0 && results.numTotalTests > 0,
    };
    writeFileSync('.jest-report.json', JSON.stringify(summary, null, 2));
  }
}
module.exports = SummaryReporter;
