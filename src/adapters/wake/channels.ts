// The wake channels the operator configured (DESIGN sections 8 and 14), built from their
// settings: main.ts reads the environment and the key files and hands them here. A channel
// whose settings are absent has no adapter: its kind is not configured (targets of it are
// refused 422 channel-not-configured, services/wake-targets.ts).
import type { WakeChannels, WakeKind } from '../../ports/wake.js';
import { ApnsChannel, type ApnsSettings } from './apns.js';
import { FcmChannel, type FcmSettings } from './fcm.js';
import { SmsChannel, VoiceChannel, type TwilioSettings } from './twilio.js';
import { WebPushChannel, type WebPushSettings } from './webpush.js';

export interface ChannelSettings {
  webpush?: WebPushSettings | undefined;
  fcm?: FcmSettings | undefined;
  apns?: ApnsSettings | undefined;
  /** SMS and voice, through one account */
  twilio?: TwilioSettings | undefined;
}

export interface BuiltChannels {
  channels: WakeChannels;
  /** the kinds that have a channel */
  configured: ReadonlySet<WakeKind>;
  /** the connections they keep open, closed */
  close(): Promise<void>;
}

export function buildWakeChannels(s: ChannelSettings): BuiltChannels {
  const webpush = s.webpush ? new WebPushChannel(s.webpush) : undefined;
  const fcm = s.fcm ? new FcmChannel(s.fcm) : undefined;
  const apns = s.apns ? new ApnsChannel(s.apns) : undefined;
  const sms = s.twilio ? new SmsChannel(s.twilio) : undefined;
  const voice = s.twilio ? new VoiceChannel(s.twilio) : undefined;
  const channels: WakeChannels = { webpush, fcm, apns, sms, voice };
  const configured = new Set((Object.keys(channels) as WakeKind[]).filter((k) => channels[k] !== undefined));
  return {
    channels,
    configured,
    async close() {
      webpush?.close();
      await apns?.close();
    },
  };
}
