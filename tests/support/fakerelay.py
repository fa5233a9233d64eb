"""A stand-in for the relay client (queued envelopes in, sends recorded) and a link drainer."""

from __future__ import annotations

from pixie.device.sync.peers import PeerLink
from pixie.device.sync.relayclient import Delivered
from pixie.protocol.identity import new_identity


class FakeRelay:
    """Stands in for RelayClient: hands over queued envelopes, records sends. A bare
    envelope comes as the sibling's, as a relay would attest it; a `Delivered`
    says who sent it."""

    def __init__(self, inbox: list[bytes | Delivered]) -> None:
        self.inbox = list(inbox)
        self.sent: list[tuple[bytes, bytes]] = []

    async def receive(self) -> Delivered:
        if not self.inbox:
            raise EOFError
        item = self.inbox.pop(0)
        return item if isinstance(item, Delivered) else Delivered(bytes(SIBLING.verify_key), item)

    async def send(self, recipient: bytes, envelope: bytes) -> None:
        self.sent.append((recipient, envelope))


SIBLING = new_identity()


async def drain(link: PeerLink) -> list[int]:
    got: list[int] = []
    try:
        while True:
            incoming = await link.receive()
            got.append(incoming.body.counter)
    except EOFError:
        return got
