// What every handler group is given: the services, presence and settings, nothing request-specific.
import type { FastifyBaseLogger } from 'fastify';
import type { Authenticator } from '../../services/authenticator.js';
import type { Config } from '../../config.js';
import type { Presence } from '../../ports/presence.js';
import type { Storage } from '../../ports/storage.js';
import type { DeviceService } from '../../services/devices.js';
import type { IncidentService } from '../../services/incidents.js';
import type { PermissionService } from '../../services/permissions.js';
import type { ResponseService } from '../../services/responses.js';
import type { SessionService } from '../../services/sessions.js';
import type { UserService } from '../../services/users.js';
import type { OperationsService } from '../../services/operations.js';
import type { WebhookService } from '../../services/webhooks.js';
import type { WebhookSender } from '../../services/webhook-sender.js';
import type { WakeTargetService } from '../../services/wake-targets.js';
import type { SmsReplyService } from '../../services/sms-replies.js';

export interface Context {
  config: Config;
  auth: Authenticator;
  incidents: IncidentService;
  users: UserService;
  devices: DeviceService;
  permissions: PermissionService;
  responses: ResponseService;
  sessions: SessionService;
  operations: OperationsService;
  webhooks: WebhookService;
  /** null when this app sends no webhooks (AppDeps.webhookSender false) */
  webhookSender: WebhookSender | null;
  /** devices' wake targets (DESIGN section 14) */
  wakeTargets: WakeTargetService;
  smsReplies: SmsReplyService;
  presence: Presence;
  /** the storage's health (GET /health) */
  storage: Pick<Storage, 'health'>;
  log: FastifyBaseLogger;
  /** the spec's info.version */
  version: string;
}
