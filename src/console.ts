// panel-license-guard/console: the operator's pages (panels, releases, retry, check now), mounted in your app.
export type { CheckPoint, MinuteCounts } from './console/activity.js';
export { type LicenseConsole, type LicenseConsoleOptions, licenseConsole } from './console/console.js';
export type { Authorize } from './console/security.js';
