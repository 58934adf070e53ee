/** A git revision of this repository, unpacked beside the working tree for side-by-side benches. */
import { execFileSync } from 'node:child_process'
import { mkdirSync, symlinkSync } from 'node:fs'
import { join } from 'node:path'

/**
 * Unpacks `paths` (all of the tree when empty) of `revision` into `into`, with a link to the
 * working tree's node_modules, so the revision runs with today's dependencies.
 */
export function unpackRevision(repoRoot: string, revision: string, into: string, paths: string[] = []): void {
  mkdirSync(into, { recursive: true })
  const tar = execFileSync('git', ['-C', repoRoot, 'archive', '--format=tar', revision, ...paths], { maxBuffer: 256 << 20 })
  execFileSync('tar', ['-x', '-C', into], { input: tar })
  symlinkSync(join(repoRoot, 'node_modules'), join(into, 'node_modules'), 'dir')
}
