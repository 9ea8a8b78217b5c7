import { chromium, type Browser } from 'playwright-core';

/**
 * Debian's chromium, driven by playwright-core: the project downloads no browser (.ci/run installs the
 * apt package when it is missing). CHROMIUM_PATH points elsewhere when needed. --no-sandbox because CI
 * runs as root, where Chromium's sandbox cannot start.
 */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium', args: ['--no-sandbox', '--disable-dev-shm-usage'] });
}
