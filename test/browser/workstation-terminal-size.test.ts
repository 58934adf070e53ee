/**
 * The workstation terminal fills the browser window and follows it (Debian chromium via
 * playwright-core, a real terminal server started by the process driver, a real shell): at
 * 1200×800 the shell's `stty size` is wider than 80×24 and the terminal covers the page less at
 * most one cell and the scrollbar; after the window shrinks to 700×450 the shell's size follows.
 * No page error. Screenshots: test-artifacts/workstation-terminal-size-*.png.
 */
import t from 'tap'
import type { Page } from 'playwright-core'
import { ProcessDriver } from '../../core/workstations/process-driver.ts'
import { ARTIFACTS, launchBrowser } from '../helpers/browser.ts'
import { tempDir } from '../helpers/temp.ts'
import { killAllUnder, relayToTarget } from '../helpers/terminal-servers.ts'

let seq = 0
/** Types `stty size` into the terminal and reads the answer off the screen: [rows, cols]. */
async function sttySize(page: Page): Promise<[number, number]> {
  const tag = `sz${++seq}`
  await page.keyboard.type(`clear; echo ${tag}=$(stty size)=\n`)
  const handle = await page.waitForFunction((tag) => {
    const text = (globalThis as any).document.querySelector('.xterm-rows')?.textContent ?? ''
    return new RegExp(`${tag}=(\\d+) (\\d+)=`).exec(text)?.slice(1, 3) ?? false
  }, tag, { timeout: 20_000 })
  const [rows, cols] = (await handle.jsonValue()) as string[]
  return [Number(rows), Number(cols)]
}

/** `stty size` once it differs from `before` (the refit is debounced and applied asynchronously), or the last answer. */
async function sttySizeAfterResize(page: Page, before: [number, number]): Promise<[number, number]> {
  let size = await sttySize(page)
  for (let i = 0; i < 10 && size[0] === before[0] && size[1] === before[1]; i++) {
    await page.waitForTimeout(300)
    size = await sttySize(page)
  }
  return size
}

/** The pixel size of the rendered terminal screen. */
async function screenBox(page: Page): Promise<{ width: number; height: number }> {
  return page.evaluate(() => {
    const rect = (globalThis as any).document.querySelector('.xterm-screen').getBoundingClientRect()
    return { width: rect.width, height: rect.height }
  })
}

t.test('workstation terminal: fills the window and follows its resizes', async (t) => {
  t.setTimeout(120_000)
  const browser = await launchBrowser(t)
  if (!browser) return
  const root = tempDir('tollgate-term-browser-')
  const driver = new ProcessDriver({ root, stopGraceMs: 2_000 })
  await driver.provision('studio')
  const handle = await driver.start('studio')
  t.teardown(async () => {
    await driver.stop(handle)
    killAllUnder(root)
  })

  const page = await browser.newPage({ viewport: { width: 1200, height: 800 } })
  const errors: string[] = []
  page.on('pageerror', (error) => errors.push(error.message))
  // The server has no TCP port (a unix socket only): the test relays one to it for the browser.
  const relay = await relayToTarget(handle.target!)
  t.teardown(() => relay.close())
  await page.goto(`${relay.url}/`)
  await page.waitForFunction(() => (globalThis as any).workstationSocket?.readyState === 1, undefined, { timeout: 30_000 })
  await page.locator('.xterm').click()

  const [rows, cols] = await sttySize(page)
  t.comment(`1200×800 → ${cols}×${rows}`)
  t.ok(cols > 80 && rows > 24, `the shell sees more than 80×24 (${cols}×${rows})`)
  let screen = await screenBox(page)
  const cell = { width: screen.width / cols, height: screen.height / rows }
  t.ok(screen.width <= 1200 && screen.width > 1200 - 14 - cell.width, `the terminal fills the width (${screen.width.toFixed(0)} px of 1200)`)
  t.ok(screen.height <= 800 && screen.height > 800 - cell.height, `the terminal fills the height (${screen.height.toFixed(0)} px of 800)`)
  await page.keyboard.type('ls -la; seq -s " " 1 60; tput cup $(($(tput lines)-1)) 0; printf bottom-row\n')
  await page.waitForFunction(() => /bottom-row/.test((globalThis as any).document.querySelector('.xterm-rows')?.lastElementChild?.textContent ?? ''), undefined, { timeout: 20_000 })
  t.pass('tput cup to the last line the shell knows lands on the last row of the page')
  await page.screenshot({ path: `${ARTIFACTS}workstation-terminal-size-1200x800.png` })

  // Smaller window: the page refits (debounced) and tells the shell.
  await page.setViewportSize({ width: 700, height: 450 })
  const [rows2, cols2] = await sttySizeAfterResize(page, [rows, cols])
  t.comment(`700×450 → ${cols2}×${rows2}`)
  t.ok(cols2 < cols && rows2 < rows, `the shell's size follows the window (${cols2}×${rows2})`)
  screen = await screenBox(page)
  t.ok(Math.abs(screen.width / cols2 - cell.width) < 0.01, 'the shell has as many columns as the page shows')
  t.ok(screen.width <= 700 && screen.width > 700 - 14 - cell.width, `the terminal fills the new width (${screen.width.toFixed(0)} px of 700)`)
  t.ok(screen.height <= 450 && screen.height > 450 - cell.height, `the terminal fills the new height (${screen.height.toFixed(0)} px of 450)`)
  await page.keyboard.type('seq -s " " 1 60\n')
  await page.waitForTimeout(300)
  await page.screenshot({ path: `${ARTIFACTS}workstation-terminal-size-700x450.png` })

  // And back larger.
  await page.setViewportSize({ width: 1000, height: 700 })
  const [rows3, cols3] = await sttySizeAfterResize(page, [rows2, cols2])
  t.ok(cols3 > cols2 && rows3 > rows2, `growing the window grows the shell (${cols3}×${rows3})`)
  t.same(errors, [], 'no page error')
})
