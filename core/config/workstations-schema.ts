/**
 * `workstations` of gateway.yaml: the driver, its limits and the sign-in (a part of coreSchema in schema.ts).
 */
import type { JsonSchema } from '../plugin.ts'

export const workstationsSchema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  description: 'Cloud workstations (core/workstations): one per project whose features.workstation is on. Absent: the service is off.',
  properties: {
    driver: { enum: ['process', 'docker'], default: 'process', description: 'process: a terminal server per project on loopback, in a working directory under dir. docker: a container per project through the Docker Engine API (see docker).' },
    docker: {
      type: 'object',
      additionalProperties: false,
      required: ['image', 'containerPort'],
      description: 'driver docker: the engine and the workstation image.',
      properties: {
        socketPath: { type: 'string', default: '/var/run/docker.sock', description: "The Docker engine's unix socket." },
        image: { type: 'string', minLength: 1, description: 'Image of the workstation server (a terminal or editor listening on containerPort).' },
        containerPort: { type: 'integer', minimum: 1, maximum: 65535, description: 'Port the image listens on; published on 127.0.0.1 at a port the engine picks.' },
        homePath: { type: 'string', default: '/home/workstation', description: "Mount point of the project's volume in the container." },
      },
    },
    dir: { type: 'string', default: './data/workstations', description: 'Parent of the per-project working directories, relative to gateway.yaml.' },
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
