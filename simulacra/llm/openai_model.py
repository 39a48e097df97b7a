"""A :class:`~simulacra.llm.LanguageModel` on any OpenAI-compatible chat-completions server.

OpenAI itself, vLLM, llama.cpp's ``llama-server``, Ollama and LM Studio all speak ``POST <base_url>/chat/completions``;
which one is used is configuration only. The ``openai`` package is imported when a model is built, not at import.
This adapter makes one HTTP request per call (two the first time a server rejects ``response_format``): retries,
budgets, recording and accounting are wrappers (:mod:`simulacra.llm.wrappers`).
"""

from __future__ import annotations

import email.utils
import logging
import os
import re
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any, Literal

from simulacra.llm.base import Completion, LLMError, LLMRequestError, LLMUnavailable, LLMUnreachable

log = logging.getLogger(__name__)

OPENAI_BASE_URL = "https://api.openai.com/v1"
#: sent as the API key to servers that need none (the openai client refuses to run without one)
PLACEHOLDER_KEY = "no-key-required"
#: statuses that mean "try again later" rather than "this request is wrong"
TRANSIENT_STATUSES = frozenset({408, 429})


def _retry_after_s(headers: Any) -> float | None:
    """Seconds to wait from ``retry-after-ms`` / ``Retry-After`` (seconds or an HTTP date); None if absent/bad."""
    if headers is None:
        return None
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            value = float(raw_ms) / 1000
            return value if value >= 0 else None
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        value = float(raw)
        return value if value >= 0 else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())  # wall clock: a real server's date


def _server_message(err: Any) -> str:
    """The server's own error text (OpenAI's ``{"error": {"message": ...}}`` or the raw body), shortened."""
    body = getattr(err, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        msg = inner.get("message") if isinstance(inner, dict) else inner
        if msg:
            return str(msg)[:300]
    response = getattr(err, "response", None)
    if response is not None:
        try:
            text = response.text
        except Exception:  # a streamed or closed body: fall back to the client's message
            text = ""
        if text:
            return text[:300]
    return str(getattr(err, "message", err))[:300]


def _error_code(err: Any) -> str | None:
    body = getattr(err, "body", None)
    inner = body.get("error", body) if isinstance(body, dict) else None
    code = inner.get("code") if isinstance(inner, dict) else None
    return str(code) if code is not None else getattr(err, "code", None)


def _token_count(value: Any) -> int | None:
    """``value`` as a token count (an integer >= 0; an integral float such as ``12.0`` is taken), else ``None``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    return None


def _schema_name(schema: dict) -> str:
    title = schema.get("title")
    name = re.sub(r"[^A-Za-z0-9_-]", "_", title if isinstance(title, str) else "")[:64]
    return name or "answer"


class OpenAIChatModel:
    """``LanguageModel`` over ``openai.OpenAI(...).chat.completions.create``.

    Args:
        model: the model name the server knows (``gpt-4o-mini``, ``Qwen/Qwen2.5-7B-Instruct``, ``llama3.1:8b``);
            default: environment variable ``OPENAI_MODEL``.
        base_url: the server's API root, usually ending in ``/v1``; default: ``OPENAI_BASE_URL``, else OpenAI.
        api_key: default: ``OPENAI_API_KEY``; when there is none and a ``base_url`` is set (a local server needing
            no key) a placeholder is sent; with neither, talking to OpenAI is refused up front.
        timeout_s: seconds per HTTP request (connect, read, write each).
        json_mode: ``"auto"``: when ``json_schema`` is given, ask ``response_format: json_schema``; if the server
            rejects that with a 400/422, retry once without it and never ask this server again. ``"off"``: never ask.
        client: an ``openai.OpenAI`` client to use instead of building one (its retries are switched off and
            ``timeout_s`` applied); ``base_url`` and ``api_key`` are then the client's.

    The client's own retries are off (``max_retries=0``): retrying is :class:`~simulacra.llm.RetryingModel`'s job.

    Raises:
        LLMError: no model is given or set in ``OPENAI_MODEL``; no key for OpenAI; ``json_mode`` unknown; the
            ``openai`` package is missing.
    """

    def __init__(
        self,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 30.0,
        json_mode: Literal["auto", "off"] = "auto",
        *,
        client: Any = None,
    ):
        if not model:
            raise LLMError("no language model named: set llm.model (e.g. --set llm.model=gpt-4o-mini); the "
                           "environment variable OPENAI_MODEL is not read")
        if json_mode not in ("auto", "off"):
            raise LLMError(f"json_mode must be 'auto' or 'off', got {json_mode!r}")
        try:
            import openai
        except ImportError as err:
            raise LLMError("a language model needs the package openai (pip install 'openai>=1.40')") from err
        self._openai = openai
        self.model = model
        self.name = f"openai:{model}"
        self.timeout_s = float(timeout_s)
        self.json_mode = json_mode
        #: None: not known yet; False: this server rejected response_format once, so it is no longer sent
        self.response_format_supported: bool | None = None if json_mode == "auto" else False
        #: usage fields already warned about as not being token counts (each is warned about once per model)
        self._usage_warned: set[str] = set()
        if client is not None:
            self._client = client.with_options(max_retries=0, timeout=self.timeout_s)
        else:
            base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
            api_key = api_key or os.environ.get("OPENAI_API_KEY") or None
            if api_key is None:
                if base_url is None:
                    raise LLMError(
                        f"no API key for {self.name} at {OPENAI_BASE_URL}: set the environment variable "
                        "OPENAI_API_KEY (or the one llm.api_key_env names), or set llm.base_url to a local server"
                    )
                api_key = PLACEHOLDER_KEY
            self._client = openai.OpenAI(
                api_key=api_key, base_url=base_url or OPENAI_BASE_URL, timeout=self.timeout_s, max_retries=0
            )
        self.base_url = str(self._client.base_url).rstrip("/")

    def __repr__(self) -> str:
        return f"OpenAIChatModel(model={self.model!r}, base_url={self.base_url!r})"

    def complete(
        self,
        messages: Sequence[dict],
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        seed: int | None = None,
        json_schema: dict | None = None,
    ) -> Completion:
        """One chat completion; see :meth:`simulacra.llm.LanguageModel.complete`.

        Raises:
            LLMUnavailable: connection refused, timeout, 408, 429 or 5xx (``status``, ``retry_after_s`` set);
                :class:`LLMUnreachable` (a subclass) when the server cannot be connected to at all.
            LLMRequestError: any other 4xx (bad key, unknown model, bad request), a 429 saying the quota is
                exhausted, or an answer that is not a chat completion (wrong ``base_url``?).
        """
        params: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in messages],
            "max_tokens": max_tokens,
            "temperature": temperature,
        }
        if seed is not None:
            params["seed"] = seed
        ask_format = json_schema is not None and self.response_format_supported is not False
        if ask_format and json_schema is not None:
            params["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": _schema_name(json_schema), "schema": json_schema},
            }
        start = time.perf_counter()
        try:
            response = self._send(params)
        except LLMRequestError as err:
            if not ask_format or err.status not in (400, 422):
                raise
            log.info("%s at %s rejected response_format (%s); asking again without it", self.name, self.base_url, err)
            del params["response_format"]
            response = self._send(params)
            self.response_format_supported = False  # only now: the 400 was about response_format
            log.warning("%s at %s does not take response_format; JSON answers will not be enforced",
                        self.name, self.base_url)
        else:
            if ask_format:
                self.response_format_supported = True
        latency = time.perf_counter() - start
        return self._completion(response, latency)

    def _where(self) -> str:
        return f"{self.name} at {self.base_url}"

    def _send(self, params: dict[str, Any]) -> Any:
        openai = self._openai
        try:
            return self._client.chat.completions.create(**params)
        except openai.APITimeoutError as err:
            raise LLMUnavailable(f"{self._where()}: no answer within {self.timeout_s:g} s (timeout)") from err
        except openai.APIConnectionError as err:
            cause = err.__cause__ or err
            raise LLMUnreachable(f"{self._where()}: cannot connect ({type(cause).__name__}: {cause})") from err
        except openai.APIStatusError as err:
            raise self._status_error(err) from err
        except openai.APIResponseValidationError as err:
            raise LLMRequestError(f"{self._where()}: the answer is not a valid chat completion: {err}") from err

    def _status_error(self, err: Any) -> LLMError:
        status = err.status_code
        server = _server_message(err)
        headers = getattr(getattr(err, "response", None), "headers", None)
        if status == 429 and _error_code(err) == "insufficient_quota":
            return LLMRequestError(f"{self._where()}: HTTP 429 quota exhausted (check the account's billing): {server}",
                                   status=status)
        if status >= 500 or status in TRANSIENT_STATUSES:
            return LLMUnavailable(f"{self._where()}: HTTP {status}: {server}", status=status,
                                  retry_after_s=_retry_after_s(headers))
        hint = {
            401: " (check the API key: llm.api_key_env names the environment variable holding it)",
            403: " (the key may not have access to this model)",
            404: " (unknown model, or a base URL that does not end in /v1?)",
        }.get(status, "")
        return LLMRequestError(f"{self._where()}: HTTP {status}{hint}: {server}", status=status)

    def _completion(self, response: Any, latency: float) -> Completion:
        choices = getattr(response, "choices", None)
        if not isinstance(choices, list):
            raise LLMRequestError(
                f"{self._where()}: the answer is not a chat completion (is the base URL the API root, usually "
                f"ending in /v1?): {str(response)[:200]!r}"
            )
        text, finish = "", None
        if choices:
            first = choices[0]
            finish = getattr(first, "finish_reason", None)
            message = getattr(first, "message", None)
            content = getattr(message, "content", None)
            text = content if isinstance(content, str) else ""
        else:
            log.warning("%s: the reply had no choices (\"choices\": []), so no answer text; it counts as an "
                        "empty answer", self._where())
        prompt_tokens, completion_tokens = self._usage(getattr(response, "usage", None))
        model = getattr(response, "model", None)
        return Completion(
            text=text,
            model=model if isinstance(model, str) and model else self.model,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            latency_s=latency,
            finish_reason=finish if isinstance(finish, str) else None,
        )

    def _usage(self, usage: Any) -> tuple[int, int]:
        """``(prompt_tokens, completion_tokens)`` from the reply's ``usage`` block, which is advisory.

        No usage block counts 0 tokens, as documented on :class:`~simulacra.llm.Completion`. In a usage block, a
        count that is missing, ``null``, not an integer (``"many"``, ``1.5``, ``true``) or negative also counts 0;
        the first time a field is bad this model logs a warning naming it (later ones are logged at debug level).
        """
        if usage is None:
            return 0, 0
        counts = []
        for name in ("prompt_tokens", "completion_tokens"):
            value = getattr(usage, name, None) if not isinstance(usage, dict) else usage.get(name)
            count = _token_count(value)
            if count is None:
                count = 0
                level = logging.DEBUG if name in self._usage_warned else logging.WARNING
                self._usage_warned.add(name)
                log.log(level, "%s: the reply's usage.%s is %s, not a token count; it counts as 0",
                        self._where(), name, repr(value)[:80] if value is not None else "missing or null")
            counts.append(count)
        return counts[0], counts[1]

    def close(self) -> None:
        """Close the HTTP connections."""
        self._client.close()
