"""The model endpoint a peer is set to use: `LLMSettings`, validated from
what `config.llm` reads (the config file, the environment, the command line).
The API key comes from the environment only and is never written anywhere.
"""

from __future__ import annotations

import contextlib
import ipaddress
import math
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from pixie.device.errors import BadInput
from pixie.device.store.config import LLM_API_KEY_ENV

DEFAULT_TIMEOUT = 60.0
MAX_TIMEOUT = 600.0
MAX_URL_CHARS = 500
MAX_MODEL_CHARS = 200


@dataclass(frozen=True, slots=True)
class LLMSettings:
    """The model endpoint, if any. The API key comes from the environment only
    and is never written anywhere."""

    url: str | None = None
    model: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    api_key: str | None = field(default=None, repr=False)

    @classmethod
    def from_values(cls, values: dict[str, Any], api_key: str | None) -> LLMSettings:
        """Validate settings as `config.llm` returns them."""
        url = check_url(values["llm_url"]) if values.get("llm_url") is not None else None
        model = check_model(values["llm_model"]) if values.get("llm_model") is not None else None
        timeout = DEFAULT_TIMEOUT
        if values.get("llm_timeout") is not None:
            timeout = check_timeout(values["llm_timeout"])
        if url is not None and model is None:
            raise BadInput(
                "a model URL is set but no model: set [llm] model, PIXIE_LLM_MODEL or --model"
            )
        if url is not None and api_key and not _key_may_travel(url):
            raise BadInput(
                f"refusing to send {LLM_API_KEY_ENV} over plain http to a host that is not "
                "this machine; use an https:// URL"
            )
        return cls(url, model, timeout, api_key)

    def describe(self) -> str:
        if self.url is None:
            return "the built-in distiller"
        return f"{self.model} at {self.url}, then the built-in distiller"


def check_url(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise BadInput("the model URL must be a non-empty string")
    url = value.strip()
    if len(url) > MAX_URL_CHARS or any(ch.isspace() or ord(ch) < 32 for ch in url):
        raise BadInput(f"the model URL must be one word of at most {MAX_URL_CHARS} characters")
    parts = urlsplit(url)
    if parts.username is not None or parts.password is not None:
        # Not echoed: the text before the @ is a secret.
        raise BadInput(f"the model URL must not carry credentials; set {LLM_API_KEY_ENV} instead")
    example = "such as http://127.0.0.1:11434/v1"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadInput(f"model URL {url!r:.80} is not an http:// or https:// address ({example})")
    if parts.query or parts.fragment:
        raise BadInput(f"model URL {url!r:.80} has a query or fragment; give the API base only")
    try:
        parts.port  # noqa: B018 - parsing it is the check
    except ValueError:
        raise BadInput(f"model URL {url!r:.80} has a bad port") from None
    return url.rstrip("/")


def check_model(value: object) -> str:
    if not isinstance(value, str):
        raise BadInput("the model name must be a string")
    model = value.strip()
    if not model or len(model) > MAX_MODEL_CHARS or any(ord(ch) < 32 for ch in model):
        raise BadInput(f"the model name must be one line of 1 to {MAX_MODEL_CHARS} characters")
    return model


def check_timeout(value: object) -> float:
    seconds = math.nan
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str):
        with contextlib.suppress(ValueError):
            seconds = float(value.strip())
    if not (math.isfinite(seconds) and 0 < seconds <= MAX_TIMEOUT):
        raise BadInput(
            f"the model timeout must be a number of seconds above 0 and at most "
            f"{MAX_TIMEOUT:g} (got {value!r:.20})"
        )
    return seconds


def _key_may_travel(url: str) -> bool:
    """An API key goes over https, or over plain http to this machine only."""
    parts = urlsplit(url)
    if parts.scheme == "https":
        return True
    host = parts.hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


__all__ = [
    "DEFAULT_TIMEOUT",
    "MAX_MODEL_CHARS",
    "MAX_TIMEOUT",
    "MAX_URL_CHARS",
    "LLMSettings",
    "check_model",
    "check_timeout",
    "check_url",
]
