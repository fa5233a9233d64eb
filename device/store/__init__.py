"""The data dir and its database: the memory log, the text mirror, contacts,
note rows, holdings, siblings, the state digest, and the key store."""
