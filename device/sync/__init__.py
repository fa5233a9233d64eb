"""Talking to siblings: the sync replica and driver, peer links, the relay
client, pairing, note offload, the control socket and the daemon."""
