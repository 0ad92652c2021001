// All operation handlers in one object, checked against the generated operation list: a
// missing operationId is a compile error.
import type { LoginService } from '../../services/login.js';
import type { OperationHandlers } from '../types.js';
import type { Context } from './context.js';
import { DeviceHandlers } from './devices.js';
import { HealthHandlers } from './health.js';
import { IncidentHandlers } from './incidents.js';
import { PermissionHandlers } from './permissions.js';
import { ResponseHandlers } from './responses.js';
import { SessionHandlers } from './session.js';
import { UserHandlers } from './users.js';
import { OperationsHandlers } from './operations.js';
import { WebhookHandlers } from './webhooks.js';
import { WakeTargetHandlers } from './wake-targets.js';

export function buildHandlers(ctx: Context, login: LoginService): OperationHandlers {
  const incidents = new IncidentHandlers(ctx);
  const session = new SessionHandlers(ctx, login);
  const users = new UserHandlers(ctx);
  const devices = new DeviceHandlers(ctx);
  const permissions = new PermissionHandlers(ctx);
  const health = new HealthHandlers(ctx);
  const responses = new ResponseHandlers(ctx);
  const operations = new OperationsHandlers(ctx);
  const webhooks = new WebhookHandlers(ctx);
  const wake = new WakeTargetHandlers(ctx);
  return {
    listIncidents: incidents.listIncidents,
    createIncident: incidents.createIncident,
    updateIncidentByOriginId: incidents.updateIncidentByOriginId,
    getIncident: incidents.getIncident,
    updateIncident: incidents.updateIncident,
    deleteIncident: incidents.deleteIncident,
    listEvents: incidents.listEvents,
    createIncidentResponse: responses.createIncidentResponse,
    listIncidentResponders: responses.listIncidentResponders,
    getSession: session.getSession,
    createSession: session.createSession,
    deleteSession: session.deleteSession,
    openSessionAsUser: session.openSessionAsUser,
    createSessionToken: session.createSessionToken,
    revokeSessionToken: session.revokeSessionToken,
    listSessionTokens: session.listSessionTokens,
    revokeSessionTokenById: session.revokeSessionTokenById,
    listUsers: users.listUsers,
    createUser: users.createUser,
    getUser: users.getUser,
    updateUser: users.updateUser,
    deleteUser: users.deleteUser,
    listDevices: devices.listDevices,
    createDevice: devices.createDevice,
    getDevice: devices.getDevice,
    updateDevice: devices.updateDevice,
    deleteDevice: devices.deleteDevice,
    createDeviceToken: devices.createDeviceToken,
    revokeDeviceTokens: devices.revokeDeviceTokens,
    createPermission: permissions.createPermission,
    deletePermission: permissions.deletePermission,
    getHealth: health.getHealth,
    getMetrics: operations.getMetrics,
    listWebhooks: webhooks.listWebhooks,
    createWebhook: webhooks.createWebhook,
    getWebhook: webhooks.getWebhook,
    updateWebhook: webhooks.updateWebhook,
    deleteWebhook: webhooks.deleteWebhook,
    rotateWebhookSecret: webhooks.rotateWebhookSecret,
    listWebhookDeliveries: webhooks.listWebhookDeliveries,
    redeliverWebhookDelivery: webhooks.redeliverWebhookDelivery,
    listWakeTargets: wake.listWakeTargets,
    createWakeTarget: wake.createWakeTarget,
    deleteWakeTarget: wake.deleteWakeTarget,
    getVapidPublicKey: wake.getVapidPublicKey,
    receiveSmsReply: wake.receiveSmsReply,
  };
}
