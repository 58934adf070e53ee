/**
 * Temporary directories for tests, removed when the test process exits (each tap file is a process
 * of its own), so a gateway restarted on the same data dir within a test still finds it.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const created: string[] = []

process.once('exit', () => {
  for (const dir of created) rmSync(dir, { recursive: true, force: true })
})

/** A fresh directory under the OS temp dir, e.g. `tempDir('tollgate-e2e-')`. */
export function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  created.push(dir)
  return dir
}
