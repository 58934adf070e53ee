/**
 * Attack on the key directory's buckets (core/projects/projects.ts, session 13): keys are found by
 * the first 29 bits of their digest. An attacker who holds a clear key whose digest shares those bits
 * with a real key's (found by a birthday search: ~2^15 hashes) must still be refused: the whole
 * digest is compared. Seen failing with `entryOf` accepting a bucket's first entry without the
 * comparison.
 */
import t from 'tap'
import { hashCredential, ProjectDirectory } from '../../core/projects/projects.ts'

/** Two clear keys whose sha256 digests share their first 29 bits. */
function keysSharingABucket(): [string, string] {
  const seen = new Map<number, string>()
  for (let i = 0; ; i++) {
    const clear = `k-${i}`
    const bucket = Number.parseInt(hashCredential(clear).slice('sha256:'.length, 'sha256:'.length + 8), 16) >>> 3
    const earlier = seen.get(bucket)
    if (earlier !== undefined) return [earlier, clear]
    seen.set(bucket, clear)
  }
}

t.test('a key whose digest shares the stored key\'s bucket is refused', async (t) => {
  const [stored, forged] = keysSharingABucket()
  const directory = new ProjectDirectory([{ id: 'victim', keys: [{ label: 'main', hash: hashCredential(stored), disabled: false }] } as never])
  t.equal(directory.lookupKey(stored).ok, true, 'the stored key authenticates')
  t.same(directory.lookupKey(forged), { ok: false, reason: 'unknown_key' }, `${forged} (same 29 leading bits as ${stored}) is refused`)
})
