// Entry point of panel-license-guard/redis: cluster mode's license store on node-redis 5.
export type { LicenseStore, StoreHealth } from './store/license-store.js';
export { type NodeRedisClient, type NodeRedisSubscriber, type RedisLicenseStoreOptions, redisLicenseStore } from './store/redis-store.js';
