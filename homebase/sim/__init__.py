"""The deterministic simulator: device, Homebase and relay in one process."""
