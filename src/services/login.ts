// A login: POST /session, or Basic credentials on any call (DESIGN sections 3 and 7). The
// attempt is counted by the throttle before its password is checked (at once on one node, in
// one transaction of the database with several: ports/login-throttle.ts), so parallel guesses
// cannot outrun the count; a right password gives it back, a check the full queue refused (503
// busy) does not count. Credentials verified before and unchanged since are admitted without a
// check, but only where an attempt would be.
//
// A throttled attempt is refused without a look at the password, except when the very same
// credentials are being checked already (a client's parallel calls before its first answer):
// it shares that check's answer, which tells nothing the other caller is not told.
import type { UserRecord } from '../ports/identity.js';
import type { LoginThrottlePort } from '../ports/login-throttle.js';
import type { Authenticator } from './authenticator.js';

/** Too many failed logins from this address (or for this account from it): 429 with Retry-After. */
export class LoginThrottled extends Error {
  constructor(readonly retryAfterS: number) {
    super(`too many failed logins; retry in ${retryAfterS} s`);
    this.name = 'LoginThrottled';
  }
}

export class LoginService {
  constructor(
    private readonly auth: Authenticator,
    private readonly throttle: LoginThrottlePort,
  ) {}

  /**
   * The user, or null for wrong credentials. Throws LoginThrottled, or HashQueueFull
   * (services/secrets.ts) when the queue of password checks is full.
   */
  login(ip: string, email: string, password: string): Promise<UserRecord | null> {
    return this.auth.shareLogin(ip, email, password, () => this.once(ip, email, password));
  }

  private async once(ip: string, email: string, password: string): Promise<UserRecord | null> {
    const { auth, throttle } = this;
    const cached = auth.cachedPassword(email, password);
    if (cached) {
      const asked = throttle.admit(ip, email);
      const admitted = asked instanceof Promise ? await asked : asked;
      if (!admitted.ok) return this.refused(email, password, admitted.retryAfter);
      // the user may have changed while the throttle was asked: then the password is checked
      const still = asked instanceof Promise ? auth.cachedPassword(email, password) : cached;
      if (still) return still;
    }
    const begun = throttle.attempt(ip, email);
    const attempt = begun instanceof Promise ? await begun : begun;
    if (!attempt.ok) return this.refused(email, password, attempt.retryAfter);
    let user: UserRecord | null;
    try {
      user = await auth.checkPassword(email, password, ip);
    } catch (err) {
      // given back; where that cannot be written, the database ages the attempt out (its error is not this one)
      await Promise.resolve(attempt.withdrawn()).catch(() => {});
      throw err;
    }
    if (user) await attempt.succeeded();
    else await attempt.failed();
    return user;
  }

  /** a throttled login: the answer of the same credentials' check in flight if it is a user, else refused */
  private async refused(email: string, password: string, retryAfter: number): Promise<UserRecord> {
    const same = this.auth.checkInFlight(email, password);
    const user = same ? await same.catch(() => null) : null;
    if (user) return user;
    throw new LoginThrottled(retryAfter);
  }
}
