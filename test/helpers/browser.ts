/**
 * Browser tests: Debian's chromium driven by playwright-core. Without /usr/bin/chromium a test is
 * skipped with the reason, unless CI is set, where it fails (.ci/run installs chromium).
 */
import { existsSync, mkdirSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { chromium, type Browser } from 'playwright-core'
import type { Test } from 'tap'

export const CHROMIUM = '/usr/bin/chromium'
/** Screenshots go here (gitignored; CI keeps them as artifacts). */
export const ARTIFACTS = fileURLToPath(new URL('../../test-artifacts/', import.meta.url))


/** Launches chromium, or skips/fails the test when it is absent. Closed at teardown. */
export async function launchBrowser(t: Test): Promise<Browser | undefined> {
  if (!existsSync(CHROMIUM)) {
    const message = `${CHROMIUM} is absent: install Debian's chromium (apt-get install chromium) to run the browser tests`
    if (process.env.CI) t.fail(message)
    else t.pass('browser test', { skip: message })
    return undefined
  }
  mkdirSync(ARTIFACTS, { recursive: true })
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--headless'] })
  t.teardown(() => browser.close())
  return browser
}
