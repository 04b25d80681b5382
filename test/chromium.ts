import type { LaunchOptions } from '@playwright/test';

/**
 * How every browser test and benchmark starts Chromium: Debian's build (Playwright's own browser
 * download does not work here), headless, and with the background services off, since the
 * machine's closed network refuses their connections. CHROMIUM overrides the path.
 */
export const chromiumLaunchOptions: LaunchOptions = {
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  args: [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--no-first-run',
  ],
};
