// Entry point of panel-license-guard/redis: cluster mode's license store on node-redis 5 or ioredis.
export type { LicenseStore, StoreHealth } from './license-store/license-store.js';
export type { IORedisClient, NodeRedisClient, NodeRedisCluster, NodeRedisSubscriber, RedisClient } from './license-store/redis/redis-connection.js';
export { type RedisLicenseStoreOptions, redisLicenseStore } from './license-store/redis/redis-store.js';
