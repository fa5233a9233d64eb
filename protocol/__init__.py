"""The shared, sans-IO core of Pixie Memory.

Everything here is pure: bytes and values in, values and decisions out. It
imports no trio, no sqlalchemy and no sockets (an import contract checks it),
so the device, the Homebase, the relay and the simulator all run the same code.
"""
