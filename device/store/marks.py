"""Per-replica watermarks: how far distillation has read each source.

They live with the other tables so that creating a data dir needs nothing
above the store; they are never synced or hashed."""

from __future__ import annotations

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from pixie.device.store.db import Base

# Longest source key a mark may hold (a conversation key, or the scan key).
MAX_MARK_CHARS = 240


class DistillMark(Base):
    """Per source, the newest local log row it has been distilled through.
    Per replica, like the text mirror's watermark: never synced or hashed."""

    __tablename__ = "distill_mark"

    source: Mapped[str] = mapped_column(String(MAX_MARK_CHARS), primary_key=True)
    seen_n: Mapped[int]
