// Entry point of panel-license-guard: the public API.

export type { FetchLike } from './client/http.js';
export type { LicenseResponse, PanelRecord, ReleaseResponse } from './client/license-response.js';
export { createMotherClient, type MotherClient, type MotherClientOptions } from './client/mother-client.js';
export {
  AuthenticationError,
  HttpStatusError,
  InvalidReleaseError,
  MalformedResponseError,
  MethodNotAllowedError,
  MotherError,
  type MotherErrorCode,
  NetworkError,
  RedirectRefusedError,
  ResponseTooLargeError,
  ServerValidationError,
  TimeoutError,
} from './errors.js';
export { RELEASE_FIELDS, type Release, serializeRelease, validateRelease } from './release.js';
export { type SignedHeaders, type SignRequestInput, signRequest, type VerifyResult, type VerifySignatureInput, verifySignature } from './signing.js';
