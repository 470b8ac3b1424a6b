// What the request path reads from the guard's resolved options. The guard's full config extends
// this, so the request path (this folder) never imports the checking machinery that builds it.
import type { StructuredLogger } from '../logger.js';
import type { AllowMatcher } from './allow-list.js';
import type { DomainPolicy } from './licensed-domains.js';
import type { PublicMessageInput, SupportContact } from './public-message.js';

export interface ServeConfig {
  /** Which panel this is, for log lines (a hash of base URL and key, never the key itself). */
  panelKey: string;
  /** HTTP status of a locked response. */
  lockStatus: number;
  /** `Retry-After` of a locked response, in seconds. */
  retryAfterSeconds: number;
  /** The app's view rendered for a locked HTML request, if any. */
  lockView: string | undefined;
  /** Requests under this prefix are API clients and always get JSON. */
  apiPrefix: string | undefined;
  /** The allow-list: paths served even while locked. */
  isAllowed: AllowMatcher;
  /** Name and colour used when the mother sent none. */
  defaults: { name: string; color: string };
  /** The message a locked page shows to visitors. */
  publicMessage: (verdict: PublicMessageInput) => string;
  supportContact: SupportContact | undefined;
  /** Days before `expires_at` from which `license.expiryWarning` is set (ascending; `expiryWarnings`). */
  expiryWarnings: readonly number[];
  /** Which hosts the panel answers on. */
  domains: DomainPolicy;
  logger: StructuredLogger;
}
