/**
 * A workstation's place on the host, shared by the sandboxed drivers (process, docker): its own
 * unprivileged uid/gid, a home on a fixed-size ext4 image (the disk cap), and a run directory the
 * workstation server puts its unix socket in. Layout under the driver's `root` (the data side,
 * never visible to a workstation):
 *
 *   <root>/.uids/<uid>          claim of one uid (created exclusively: two provisions never share one)
 *   <root>/<project>/           0700 root: only the gateway walks it
 *     uid                       the project's uid (= gid)
 *     home.img                  sparse ext4 image of `diskMb`, root of its filesystem owned by uid
 *     server.log                the server's output (written by the gateway's file descriptor)
 *
 * and under `runDir` (default /run/tollgate-workstations, 0711), one directory per running
 * workstation, named by a hash of root and project (short: unix socket paths are limited to 108
 * bytes). bubblewrap opens its bind sources as the workstation's uid, so these must be reachable
 * by it, unlike the data dir:
 *
 *   <runDir>/<key>/             0711 root
 *     home/                     the image's mount point while running (nosuid, nodev), 0700 uid
 *     run/                      2750 uid:<gateway gid>: the server's socket, reachable by the gateway only
 *     etc/passwd, etc/group     the one account the sandbox knows
 *
 * Why a uid per workstation: files, signals and /proc are then separated by the kernel's own rules,
 * the process cap (RLIMIT_NPROC counts per uid) is exact, and stopping a workstation is "kill every
 * process of this uid". Switching uid and mounting need root: where the gateway is not root the
 * provision fails with that reason, never running the tenant as the gateway's user.
 */
import { execFile } from 'node:child_process'
import { closeSync, existsSync, ftruncateSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, rmSync, chmodSync, chownSync, writeFileSync } from 'node:fs'
import { createHash } from 'node:crypto'
import { join, resolve } from 'node:path'
import { promisify } from 'node:util'
import { DriverError } from './driver.ts'

const run = promisify(execFile)

/** Resource caps of one workstation (gateway.yaml `workstations.limits`). */
export interface WorkstationLimits {
  /** Memory (cgroup memory limit; RLIMIT_AS per process where cgroups are missing). */
  memoryMb: number
  /** CPU share in cores (cgroup CPU quota). */
  cpus: number
  /** Processes and threads (cgroup pids.max and RLIMIT_NPROC of the workstation's uid). */
  processes: number
  /** Size of the home filesystem. */
  diskMb: number
  /** Size of the private /tmp (tmpfs, counted in memory). */
  tmpMb: number
}

export const DEFAULT_LIMITS: WorkstationLimits = { memoryMb: 1024, cpus: 1, processes: 256, diskMb: 2048, tmpMb: 256 }

export interface WorkspaceOptions {
  root: string
  /** Where running workstations' homes are mounted and their sockets live (default /run/tollgate-workstations). */
  runDir?: string
  /** First uid handed to workstations; uids [uidBase, uidBase + uidCount) are theirs alone. */
  uidBase?: number
  uidCount?: number
}

/** Project ids become directory names: only what cannot climb out of `root`. */
export function safeName(projectId: string): string {
  if (!/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/.test(projectId) || projectId.includes('..')) throw new DriverError(`project id ${JSON.stringify(projectId)} cannot name a directory`)
  return projectId
}

export interface WorkspacePaths {
  base: string
  image: string
  log: string
  stage: string
  home: string
  run: string
  etc: string
  socket: string
}

/** Host account uids (from /etc/passwd): a workstation never gets one of them. */
function hostUids(): Set<number> {
  try {
    return new Set(readFileSync('/etc/passwd', 'utf8').split('\n').map((line) => Number(line.split(':')[2])).filter(Number.isInteger))
  } catch {
    return new Set()
  }
}

export class Workspaces {
  readonly root: string
  readonly runDir: string
  private readonly uidBase: number
  private readonly uidCount: number

  constructor(options: WorkspaceOptions) {
    this.root = resolve(options.root)
    this.runDir = resolve(options.runDir ?? '/run/tollgate-workstations')
    this.uidBase = options.uidBase ?? 200_000
    this.uidCount = options.uidCount ?? 10_000
  }

  paths(projectId: string): WorkspacePaths {
    const base = join(this.root, safeName(projectId))
    const stage = join(this.runDir, createHash('sha256').update(`${this.root}\0${projectId}`).digest('hex').slice(0, 16))
    return { base, image: join(base, 'home.img'), log: join(base, 'server.log'), stage, home: join(stage, 'home'), run: join(stage, 'run'), etc: join(stage, 'etc'), socket: join(stage, 'run', 'server.sock') }
  }

  /** Refuses to go on where the sandbox cannot be built: the reason becomes the workstation's. */
  static requireRoot(what: string): void {
    if (process.getuid?.() !== 0) throw new DriverError(`${what} needs the gateway to run as root (it gives each workstation its own uid and mounts its disk image); refusing to run a workstation as the gateway's own user`)
  }

  /** The project's uid, or undefined before provisioning. */
  uidOf(projectId: string): number | undefined {
    try {
      const uid = Number(readFileSync(join(this.paths(projectId).base, 'uid'), 'utf8'))
      return Number.isInteger(uid) && uid >= this.uidBase && uid < this.uidBase + this.uidCount ? uid : undefined
    } catch {
      return undefined
    }
  }

  /** Every uid claimed under this root, with its project. */
  claimedUids(): Map<number, string> {
    const claims = new Map<number, string>()
    const dir = join(this.root, '.uids')
    if (!existsSync(dir)) return claims
    for (const name of readdirSync(dir)) {
      try { claims.set(Number(name), readFileSync(join(dir, name), 'utf8')) } catch { /* released meanwhile */ }
    }
    return claims
  }

  /** Claims a uid and makes the disk image; idempotent. */
  async provision(projectId: string, diskMb: number): Promise<number> {
    Workspaces.requireRoot('the workstation sandbox')
    const p = this.paths(projectId)
    mkdirSync(this.root, { recursive: true, mode: 0o700 })
    mkdirSync(p.base, { recursive: true, mode: 0o700 })
    chmodSync(p.base, 0o700)
    const uid = this.uidOf(projectId) ?? this.claimUid(projectId)
    this.ensureClaim(projectId, uid)
    if (!existsSync(p.image)) await this.makeImage(p.image, diskMb, uid)
    return uid
  }

  /** The directories under runDir a running workstation's sandbox is made of (recreated after a reboot empties /run). */
  private stage(projectId: string, uid: number): void {
    const p = this.paths(projectId)
    mkdirSync(this.runDir, { recursive: true, mode: 0o711 })
    chmodSync(this.runDir, 0o711) // traversable, not listable: a uid reaches only the paths it is given
    mkdirSync(p.stage, { recursive: true, mode: 0o711 })
    chmodSync(p.stage, 0o711)
    for (const dir of [p.home, p.run, p.etc]) mkdirSync(dir, { recursive: true })
    // The socket's directory: owned by the workstation, group the gateway's, setgid so the socket
    // inherits that group; no access for anyone else (another workstation's uid included).
    chownSync(p.run, uid, process.getgid!())
    chmodSync(p.run, 0o2750)
    chmodSync(p.etc, 0o755)
    writeFileSync(join(p.etc, 'passwd'), `root:x:0:0:root:/nonexistent:/usr/sbin/nologin\nworkstation:x:${uid}:${uid}:workstation ${projectId}:/home/workstation:/bin/bash\n`, { mode: 0o644 })
    writeFileSync(join(p.etc, 'group'), `root:x:0:\nworkstation:x:${uid}:\n`, { mode: 0o644 })
  }

  /** What a host-wide uid claim holds: which root and project own the uid. */
  private claimKey(projectId: string): string {
    return `${this.root}\0${projectId}`
  }

  /**
   * Claims the next free uid host-wide (`<runDir>/.uids/<uid>`, created exclusively), so two
   * gateways or driver roots on one host never hand out the same uid; the root keeps its own list
   * too (`<root>/.uids/`, what `reap` walks).
   */
  private claimUid(projectId: string): number {
    const global = join(this.runDir, '.uids')
    const local = join(this.root, '.uids')
    mkdirSync(global, { recursive: true, mode: 0o700 })
    mkdirSync(local, { recursive: true, mode: 0o700 })
    const taken = hostUids()
    const self = process.getuid!()
    for (let uid = this.uidBase; uid < this.uidBase + this.uidCount; uid++) {
      if (uid === 0 || uid === self || taken.has(uid) || existsSync(join(local, String(uid)))) continue
      try {
        writeFileSync(join(global, String(uid)), this.claimKey(projectId), { flag: 'wx', mode: 0o600 })
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'EEXIST') continue
        throw error
      }
      writeFileSync(join(local, String(uid)), projectId, { mode: 0o600 })
      writeFileSync(join(this.paths(projectId).base, 'uid'), String(uid), { mode: 0o600 })
      return uid
    }
    throw new DriverError(`no free workstation uid in [${this.uidBase}, ${this.uidBase + this.uidCount}): raise workstations.sandbox.uidCount`)
  }

  /** Makes sure the host-wide claim of the project's uid is still ours (runDir is emptied by a reboot). */
  private ensureClaim(projectId: string, uid: number): void {
    const file = join(this.runDir, '.uids', String(uid))
    mkdirSync(join(this.runDir, '.uids'), { recursive: true, mode: 0o700 })
    try {
      writeFileSync(file, this.claimKey(projectId), { flag: 'wx', mode: 0o600 })
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
      if (readFileSync(file, 'utf8') !== this.claimKey(projectId)) throw new DriverError(`uid ${uid} of ${projectId} is now claimed by another workstation on this host: delete and provision it again`)
    }
  }

  private async makeImage(image: string, diskMb: number, uid: number): Promise<void> {
    const partial = `${image}.partial`
    const fd = openSync(partial, 'w', 0o600)
    try {
      ftruncateSync(fd, diskMb * 1024 * 1024) // sparse: host disk is used as the workstation writes
    } finally {
      closeSync(fd)
    }
    try {
      await run('mkfs.ext4', ['-q', '-F', '-m', '0', '-E', `root_owner=${uid}:${uid}`, partial])
    } catch (error) {
      rmSync(partial, { force: true })
      throw new DriverError(`the workstation's disk image could not be made (mkfs.ext4, e2fsprogs): ${(error as Error).message.split('\n')[0]}`)
    }
    renameSync(partial, image)
  }

  /** Whether the home image is mounted (its mount point is in our mount table). */
  mounted(projectId: string): boolean {
    const home = this.paths(projectId).home
    try {
      // mountinfo field 5 is the mount point (octal-escaped spaces; our paths have none).
      return readFileSync('/proc/self/mountinfo', 'utf8').split('\n').some((line) => line.split(' ')[4] === home)
    } catch {
      return false
    }
  }

  /** Prepares the run directory and mounts the home image (loop device, nosuid, nodev) unless it already is. */
  async mount(projectId: string): Promise<void> {
    const p = this.paths(projectId)
    const uid = this.uidOf(projectId)
    if (uid === undefined || !existsSync(p.image)) throw new DriverError(`the workspace of ${projectId} is missing: provision it again`)
    this.ensureClaim(projectId, uid)
    this.stage(projectId, uid)
    if (this.mounted(projectId)) return
    try {
      await run('mount', ['-o', 'loop,nosuid,nodev,noatime', p.image, p.home])
    } catch (error) {
      throw new DriverError(`the workstation's disk image could not be mounted (needs loop devices and root): ${(error as Error).message.split('\n')[0]}`)
    }
    chownSync(p.home, uid, uid)
    chmodSync(p.home, 0o700)
    const readme = join(p.home, 'README.txt')
    if (!existsSync(readme)) {
      writeFileSync(readme, `Workstation of project ${projectId}. Files here survive stop and start; delete removes them.\n`)
      chownSync(readme, uid, uid)
    }
  }

  async unmount(projectId: string): Promise<void> {
    for (let attempt = 0; attempt < 20 && this.mounted(projectId); attempt++) {
      try {
        await run('umount', [this.paths(projectId).home])
      } catch {
        await new Promise((r) => setTimeout(r, 100)) // busy: a process of the workstation is still exiting
      }
    }
    if (this.mounted(projectId)) await run('umount', ['-l', this.paths(projectId).home]).catch(() => {})
  }

  /** Removes everything of the project and releases its uid. */
  async remove(projectId: string): Promise<void> {
    const uid = this.uidOf(projectId)
    await this.unmount(projectId)
    if (this.mounted(projectId)) throw new DriverError(`the home of ${projectId} is still mounted`)
    rmSync(this.paths(projectId).base, { recursive: true, force: true })
    rmSync(this.paths(projectId).stage, { recursive: true, force: true })
    if (uid !== undefined) {
      rmSync(join(this.root, '.uids', String(uid)), { force: true })
      const claim = join(this.runDir, '.uids', String(uid))
      try {
        if (readFileSync(claim, 'utf8') === this.claimKey(projectId)) rmSync(claim, { force: true })
      } catch { /* not claimed */ }
    }
  }
}

/** PIDs whose real or effective uid is `uid` (every process of one workstation). */
export function processesOf(uid: number): number[] {
  const pids: number[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const status = readFileSync(`/proc/${entry}/status`, 'utf8')
      const uids = /^Uid:\s+(\d+)\s+(\d+)/m.exec(status)
      const state = /^State:\s+(\S)/m.exec(status)?.[1]
      if (uids && (Number(uids[1]) === uid || Number(uids[2]) === uid) && state !== 'Z' && state !== 'X') pids.push(Number(entry))
    } catch { /* gone */ }
  }
  return pids
}

/** Signals every process of `uid`; true when there was one. */
export function signalUid(uid: number, signal: NodeJS.Signals): boolean {
  const pids = processesOf(uid)
  for (const pid of pids) {
    try { process.kill(pid, signal) } catch { /* gone */ }
  }
  return pids.length > 0
}
