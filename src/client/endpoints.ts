// One endpoint per mother, shared by every panel client at it (`panels` mode): the parsed URL,
// time limits and fetch are built once per base URL instead of once per panel.
import { clientAt, type MotherClient, motherEndpoint } from './mother-client.js';
import type { MotherEndpoint, MotherEndpointOptions } from './mother-endpoint.js';

/** Distinct base URLs remembered; past this the memo starts over (a deployment has a handful). */
const MAX_ENDPOINTS = 256;

export interface EndpointCache {
  /** The endpoint at `baseUrl` (validated once; throws like createMotherClient() on a bad one). */
  at(baseUrl: string): MotherEndpoint;
  /** A panel's client at `baseUrl`, over the shared endpoint. */
  clientFor(baseUrl: string, apiKey: string, apiSecret: string): MotherClient;
}

export function createEndpointCache(shared: Omit<MotherEndpointOptions, 'baseUrl'>): EndpointCache {
  const endpoints = new Map<string, MotherEndpoint>();
  const at = (baseUrl: string): MotherEndpoint => {
    let endpoint = endpoints.get(baseUrl);
    if (endpoint === undefined) {
      endpoint = motherEndpoint({ ...shared, baseUrl });
      if (endpoints.size >= MAX_ENDPOINTS) endpoints.clear();
      endpoints.set(baseUrl, endpoint);
    }
    return endpoint;
  };
  return { at, clientFor: (baseUrl, apiKey, apiSecret) => clientAt(at(baseUrl), apiKey, apiSecret) };
}
