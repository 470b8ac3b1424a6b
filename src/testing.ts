// Entry point `panel-license-guard/testing`: the mother emulator for tests, demos and users.
export {
  createMotherEmulator,
  type EmulatedRelease,
  type EmulatedRequest,
  type EmulatorFaults,
  type EmulatorPanel,
  type MotherEmulator,
  type MotherEmulatorOptions,
} from './emulator/emulator.js';
