/**
 * `workstations` of gateway.yaml: the driver, its limits and the sign-in (a part of coreSchema in schema.ts).
 */
import type { JsonSchema } from '../proxy/plugin.ts'

export const workstationsSchema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  description: 'Cloud workstations (core/workstations): one per project whose features.workstation is on. Absent: the service is off.',
  properties: {
    driver: { enum: ['process', 'docker'], default: 'process', description: 'process: a terminal server per project in a bubblewrap sandbox (own uid, PID and network namespace; needs root, bubblewrap, util-linux, e2fsprogs and loop devices). docker: a container per project through the Docker Engine API (see docker). There is no unsandboxed driver.' },
    egress: { enum: ['none'], default: 'none', description: "Network a workstation reaches. none: a network namespace with only its own loopback (no route to the gateway, the admin API, databases or the internet). No other value is implemented yet." },
    env: {
      type: 'object',
      default: {},
      propertyNames: { pattern: '^[A-Za-z_][A-Za-z0-9_]{0,127}$' },
      additionalProperties: { type: 'string', maxLength: 4096 },
      description: "The allow-list of a workstation's environment: these variables (name: value) and HOME, USER, LOGNAME, SHELL, PATH, TERM, LANG are all it gets; nothing of the gateway's environment is passed on.",
    },
    limits: {
      type: 'object',
      additionalProperties: false,
      default: {},
      description: 'Caps of each workstation: cgroups (v2 or v1) where the host has them writable, rlimits otherwise (memory per process, processes per uid, no CPU cap).',
      properties: {
        memoryMb: { type: 'integer', minimum: 64, default: 1024, description: 'Memory of all its processes together, in MiB (cgroup memory limit).' },
        cpus: { type: 'number', minimum: 0.05, default: 1, description: 'CPU time in cores (cgroup CPU quota).' },
        processes: { type: 'integer', minimum: 16, default: 256, description: 'Processes and threads (cgroup pids.max and RLIMIT_NPROC of its uid): a fork bomb stops there.' },
        diskMb: { type: 'integer', minimum: 16, default: 2048, description: 'Size of its home filesystem (a sparse ext4 image on the process driver; fixed at provisioning).' },
        tmpMb: { type: 'integer', minimum: 1, default: 256, description: 'Size of its private /tmp (tmpfs).' },
      },
    },
    sandbox: {
      type: 'object',
      additionalProperties: false,
      default: {},
      description: 'Host side of the sandbox (process and docker drivers).',
      properties: {
        uidBase: { type: 'integer', minimum: 1000, maximum: 4_000_000_000, default: 200000, description: "First uid given to workstations; each gets its own uid (= gid) from [uidBase, uidBase + uidCount). Host accounts' uids and the gateway's are skipped." },
        uidCount: { type: 'integer', minimum: 1, maximum: 1_000_000, default: 10000, description: 'How many uids workstations may use (at most this many workstations).' },
        runDir: { type: 'string', default: '/run/tollgate-workstations', description: "Where running workstations' homes are mounted and their server sockets live (made 0711; must be reachable by the workstations' uids, unlike dir)." },
      },
    },
    docker: {
      type: 'object',
      additionalProperties: false,
      required: ['image'],
      description: 'driver docker: the engine and the workstation image.',
      properties: {
        socketPath: { type: 'string', default: '/var/run/docker.sock', description: "The Docker engine's unix socket." },
        image: { type: 'string', minLength: 1, description: 'Image of the workstation server: it must run `terminal-server --socket /run/workstation/server.sock` or any server listening on that unix socket (examples/workstation-image/build.sh builds one locally).' },
        command: { type: 'array', items: { type: 'string' }, description: "The container's command (default: the image's)." },
      },
    },
    ide: {
      type: 'object',
      additionalProperties: false,
      required: ['dir'],
      description: 'VS Code in the browser (code-server) in each workstation, at /workstations/:id/ide/, next to the terminal (process driver). Absent: the terminal only.',
      properties: {
        dir: { type: 'string', minLength: 1, description: 'Directory examples/workstation-image/install-code-server.sh installed Node 24 and code-server into (relative to gateway.yaml); mounted read-only in the sandbox. Missing files fail provisioning with the reason.' },
      },
    },
    dir: { type: 'string', default: './data/workstations', description: "Parent of the per-project data (disk images, logs), relative to gateway.yaml. Never visible to a workstation." },
    creditsPerMinute: { type: 'integer', minimum: 0, default: 1, description: "Credits charged to the project per started minute of running time (api type `workstation`)." },
    idleStopMinutes: { type: 'number', minimum: 0, default: 30, description: 'Stop a ready workstation after this long without traffic through the gateway (0 = never).' },
    startTimeoutSeconds: { type: 'integer', minimum: 1, default: 90, description: 'Provisioning or starting longer than this ends in failed.' },
    stopTimeoutSeconds: { type: 'integer', minimum: 1, default: 60, description: 'Stopping or deleting longer than this ends in failed.' },
    publicUrl: { type: 'string', pattern: '^https?://', description: 'Base URL browsers reach the public listener at (OIDC redirect, Open button); default: from the Host header.' },
    oidc: {
      type: 'object',
      additionalProperties: false,
      required: ['issuer', 'clientId'],
      description: 'The OpenID Connect provider whose accounts are linked to workstation owners.',
      properties: {
        issuer: { type: 'string', pattern: '^https?://', description: 'Issuer URL (its /.well-known/openid-configuration is read).' },
        clientId: { type: 'string', minLength: 1, description: 'Client id registered at the provider.' },
        clientSecret: { type: 'string', description: 'Client secret, e.g. ${OIDC_CLIENT_SECRET}; omit for a public client (PKCE only).' },
      },
    },
  },
}
