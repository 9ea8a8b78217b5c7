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
    // Where the suite's time goes (docs/contributors/tests.md, "The time budget"): each file's wall time,
    // slowest first, kept in .jest-timings.json and the ten slowest printed.
    const files = results.testResults
      .map((r) => ({ file: require('node:path').relative(process.cwd(), r.testFilePath), seconds: Math.round((r.perfStats.end - r.perfStats.start) / 100) / 10 }))
      .sort((a, b) => b.seconds - a.seconds);
    writeFileSync('.jest-timings.json', JSON.stringify(files, null, 2));
    if (files.length > 10) {
      process.stdout.write(`\nslowest test files (wall time, seconds):\n${files.slice(0, 10).map((f) => `  ${String(f.seconds).padStart(6)}  ${f.file}`).join('\n')}\n`);
    }
  }
}
module.exports = SummaryReporter;
