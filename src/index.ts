// Entry point of panel-license-guard: the public API.

export type { FetchLike } from './client/http.js';
export type { LicenseResponse, PanelRecord, ReleaseResponse } from './client/license-response.js';
export { createMotherClient, type MotherClient, type MotherClientOptions } from './client/mother-client.js';
export {
  AuthenticationError,
  HttpStatusError,
  InvalidReleaseError,
  type LicenseGuardError,
  LocalStateError,
  MalformedResponseError,
  MethodNotAllowedError,
  MotherError,
  type MotherErrorCode,
  NetworkError,
  OutboxDatabaseError,
  type OutboxDatabaseErrorCode,
  PanelDeliveryError,
  PanelHostError,
  PartialSettleError,
  RedirectRefusedError,
  ResponseTooLargeError,
  ServerValidationError,
  TimeoutError,
  TransactionEndedError,
} from './errors.js';
export type { ExpiringEvent } from './guard/expiry-warnings.js';
export type { GuardEvents, LicenseGuard } from './guard/guard-api.js';
export type { GuardLogger, LicenseGuardOptions } from './guard/guard-options.js';
export type { HealthBody, HealthHandlerOptions } from './guard/health-handler.js';
export { licenseGuard } from './guard/license-guard.js';
export type { ChangeEvent } from './guard/license-monitor.js';
export type { LicenseStatus } from './guard/license-status.js';
export type { StatusBody, StatusHandlerOptions } from './guard/status-handler.js';
export type { LicenseStore, StoreHealth } from './license-store/license-store.js';
export type { LogFields, Logger } from './logger.js';
export type {
  DeadEvent,
  DeliveredEvent,
  OutboxErrorEvent,
  OutboxEventName,
  OutboxEvents,
  OutboxListener,
  OutboxLogger,
  PrunedEvent,
  RetryingEvent,
} from './outbox/events.js';
export type { OutboxPanelCredentials, OutboxPanelsOptions, ReleaseOutboxOptions, ReleaseSender } from './outbox/options.js';
export {
  createReleaseOutbox,
  type OutboxEnqueueOptions,
  type OutboxEntry,
  type OutboxStats,
  type PanelQuery,
  type ReleaseOutbox,
} from './outbox/outbox.js';
export type { RetentionOptions } from './outbox/retention.js';
export type {
  ChangedRow,
  ClaimedRow,
  ClaimRequest,
  DeliveryOutcome,
  EnqueueLease,
  EnqueueOptions,
  EnqueueResult,
  FairClaim,
  FairClaimRequest,
  HeldRow,
  NewOutboxRow,
  OutboxState,
  OutboxStore,
  PanelCounts,
  PanelScope,
  PruneRequest,
  PruneResult,
  SettleRequest,
  SettleResult,
  StoredRow,
  TransactionQuery,
} from './outbox/store.js';
export { UNASSIGNED_PANEL } from './outbox/store.js';
export { createMemoryOutboxStore, memoryOutboxStore } from './outbox/stores/memory/memory-store.js';
// Deprecated here: the SQLite store comes from `panel-license-guard/sqlite` (sqliteOutboxStore).
export { createSqliteOutboxStore, type SqliteOutboxStoreOptions } from './outbox/stores/sqlite/sqlite-store.js';
export { RELEASE_FIELDS, type Release, serializeRelease, validateRelease } from './release.js';
export type { AllowRule } from './serve/allow-list.js';
export type { Branding } from './serve/branding.js';
export type { LicenseState } from './serve/license-state.js';
export type { LicenseLocals } from './serve/snapshot.js';
export { type SignedHeaders, type SignRequestInput, signRequest, type VerifyResult, type VerifySignatureInput, verifySignature } from './signing.js';
