"""How a peer takes in an envelope the relay hands it, as steps (sans-IO).

The order is the rule: first `Screen` (before any cryptography, a sender that
is not a sibling costs a set lookup), then `Open` (open, attribute, decode,
check the counter), and only what both pass is acted on. Whoever runs the
steps answers each with `Admission`'s own call and decides nothing:

- `Screen`: ``Admission.screen(sender, size, strangers=...)``, a bool;
- `Open`: ``Admission.admit(sender, envelope, strangers)``, `Incoming` or
  `Rejected` (a driver may take it on its event loop or in a thread).

The stream's value at its end is `Incoming`, `Rejected`, or `Unscreened`
for an envelope the screen turned away. Two drivers take these steps:
`pixie.device.sync.peers.PeerLink.receive`, under trio, and the simulator.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Screen:
    sender: bytes
    size: int
    strangers: bool


@dataclass(frozen=True, slots=True)
class Open:
    sender: bytes
    envelope: bytes
    strangers: bool


@dataclass(frozen=True, slots=True)
class Unscreened:
    """An envelope the screen turned away, unopened."""

    sender: bytes
    size: int


AdmitStep = Screen | Open


def admitting(
    sender: bytes, envelope: bytes, *, strangers: bool = False
) -> Generator[AdmitStep, object, object]:
    """The steps that take in ``envelope``, which the relay says ``sender``
    sent; the answer to `Screen` is a bool, to `Open` admission's verdict,
    which is also the stream's value."""
    if not (yield Screen(sender, len(envelope), strangers)):
        return Unscreened(sender, len(envelope))
    return (yield Open(sender, envelope, strangers))


__all__ = ["AdmitStep", "Open", "Screen", "Unscreened", "admitting"]
