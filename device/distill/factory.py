"""The model settings and the `LLMRouter` a pass distils with."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pixie.device.distill.contract import (
    Backend,
)
from pixie.device.distill.http import ChatCompletionsBackend
from pixie.device.distill.offline import OfflineDistiller
from pixie.device.distill.router import LLMRouter
from pixie.device.distill.settings import LLMSettings
from pixie.device.store import config

if TYPE_CHECKING:
    pass


# -- settings and routers --------------------------------------------------------------


def llm_settings(config_path: Path, flags: dict[str, Any] | None = None) -> LLMSettings:
    """The [llm] settings in force, validated; the API key from the environment."""
    return LLMSettings.from_values(config.llm(config_path, flags), config.llm_api_key())


def router_for(settings: LLMSettings, *, offline_only: bool = False) -> LLMRouter:
    """The configured endpoint (if any), then the built-in distiller."""
    backends: list[Backend] = []
    if settings.url is not None and settings.model is not None and not offline_only:
        backends.append(
            ChatCompletionsBackend(
                settings.url, settings.model, timeout=settings.timeout, api_key=settings.api_key
            )
        )
    backends.append(OfflineDistiller())
    return LLMRouter(tuple(backends))
