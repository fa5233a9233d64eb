"""The Homebase peer: a full replica of the device's state plus the holder role
(parked note bodies and the gate that serves them). Builds on `pixie.device`."""
