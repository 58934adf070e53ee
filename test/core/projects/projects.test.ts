/**
 * The key lookup of the project directory: a presented key finds its project by the digest's
 * leading bits, and only the whole digest accepts it, including when two stored digests share
 * those bits.
 */
import t from 'tap'
import { hashCredential, ProjectDirectory, type Project } from '../../../core/projects/projects.ts'

const project = (id: string, keys: Project['keys']): Project => ({
  id,
  name: id,
  plan: 'standard',
  scopes: new Set(['rpc']),
  credits: { allocation: 100, period: 'month' },
  features: { proveBatch: false, sponsoredWallet: false, relayToConfidentialSpace: false, tee: false, workstation: false },
  keys,
  settings: {},
})

/** A stored digest equal to `hashed` in its first `same` hex digits and different after them. */
function sharingPrefix(hashed: string, same: number): string {
  const hex = hashed.slice('sha256:'.length)
  const flipped = hex.slice(same).replace(/./g, (c) => ((parseInt(c, 16) + 1) % 16).toString(16))
  return 'sha256:' + hex.slice(0, same) + flipped
}

t.test('a key finds its project and key; unknown, disabled and expired keys are refused with the reason', async (t) => {
  const directory = new ProjectDirectory([
    project('a', [
      { label: 'live', hash: hashCredential('key-live'), disabled: false },
      { label: 'off', hash: hashCredential('key-off'), disabled: true },
      { label: 'old', hash: hashCredential('key-old'), disabled: false, expiresAt: 1000 },
    ]),
    project('b', [{ label: 'b1', hash: hashCredential('key-b') }].map((k) => ({ ...k, disabled: false }))),
  ])
  t.match(directory.lookupKey('key-live'), { ok: true, project: { id: 'a' }, key: { label: 'live' } })
  t.match(directory.lookupKey('key-b'), { ok: true, project: { id: 'b' }, key: { label: 'b1' } })
  t.same(directory.lookupKey('key-nobody'), { ok: false, reason: 'unknown_key' })
  t.same(directory.lookupKey(''), { ok: false, reason: 'unknown_key' })
  t.same(directory.lookupKey('key-live '), { ok: false, reason: 'unknown_key' }, 'one character more is another key')
  t.match(directory.lookupKey('key-off'), { ok: false, reason: 'disabled_key', project: { id: 'a' } })
  t.match(directory.lookupKey('key-old', 2000), { ok: false, reason: 'expired_key', project: { id: 'a' } })
  t.equal(directory.lookupKey('key-old', 999).ok, true, 'before its expiry')
  t.same(directory.ownerOfHash(hashCredential('key-b')), { projectId: 'b', label: 'b1' })
  t.equal(directory.ownerOfHash(hashCredential('key-nobody')), undefined)
})

t.test('stored digests that share their leading bits are each found, and only by their whole digest', async (t) => {
  const real = hashCredential('the-real-key')
  // Same first 16 hex digits (the bucket is made of the first 29 bits), different after them.
  const neighbour = sharingPrefix(real, 16)
  const lastBitOff = sharingPrefix(real, 63)
  t.not(neighbour, real)
  for (const order of [
    [real, neighbour, lastBitOff],
    [neighbour, lastBitOff, real],
  ]) {
    const directory = new ProjectDirectory([project('p', order.map((hash, i) => ({ label: `k${i}`, hash, disabled: false })))])
    t.match(directory.lookupKey('the-real-key'), { ok: true, key: { hash: real } }, 'the real key, wherever it is in its bucket')
    t.equal(directory.ownerOfHash(neighbour)?.projectId, 'p')
    t.equal(directory.ownerOfHash(lastBitOff)?.projectId, 'p')
    t.equal(directory.ownerOfHash(sharingPrefix(real, 40)), undefined, 'a digest of the same bucket that nobody stored')
  }
})

t.test('a key listed twice belongs to the later listing, as before', async (t) => {
  const hash = hashCredential('shared-key')
  const directory = new ProjectDirectory([project('first', [{ label: 'one', hash, disabled: false }]), project('second', [{ label: 'two', hash, disabled: false }])])
  t.match(directory.lookupKey('shared-key'), { ok: true, project: { id: 'second' }, key: { label: 'two' } })
  t.same(directory.ownerOfHash(hash), { projectId: 'second', label: 'two' })
})

t.test('replace swaps the keys: an old key stops, a new one works', async (t) => {
  const directory = new ProjectDirectory([project('p', [{ label: 'old', hash: hashCredential('old-key'), disabled: false }])])
  directory.replace([project('p', [{ label: 'new', hash: hashCredential('new-key'), disabled: false }])])
  t.same(directory.lookupKey('old-key'), { ok: false, reason: 'unknown_key' })
  t.match(directory.lookupKey('new-key'), { ok: true, key: { label: 'new' } })
})
