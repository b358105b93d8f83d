"""One chat completion through LiteLLM, with retries, a timeout, usage and clear per-model errors.

`complete(model, messages)` is the only way this package talks to a provider. It

- checks the model name resolves to a LiteLLM provider and that the provider's key is set
  (environment, or a `.env` file in the working directory, loaded once; an existing environment
  variable always wins, so keys from a Kubernetes Secret are never overridden);
- retries rate limits and transient failures (429, 408, 5xx, connection errors, timeouts) with
  exponential backoff and jitter, honouring a provider's `Retry-After` up to the cap;
- handles the `temperature` quirk: a model that rejects the parameter is retried once without it,
  and remembered, so later calls in the same process skip it;
- returns the text with `Usage` (tokens, cost via LiteLLM's price map, latency, calls, retries),
  or raises `ModelCallError` whose message names the model and what to do.

LiteLLM is imported on the first call, never at module import.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import os
import random
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from wpbench_k8s.manifest import ModelSpec
from wpbench_k8s.records import Usage

log = logging.getLogger("wpbench_k8s.models")

Message = Mapping[str, str]
ErrorKind = Literal[
    "unknown_model",  # no provider for the name, or the provider says the model does not exist
    "missing_key",  # the provider's API key is not set
    "auth",  # the key was refused
    "rate_limited",  # still rate limited after every retry
    "outage",  # 5xx / connection failures after every retry
    "timeout",  # every attempt timed out
    "bad_request",  # the provider refused the request (context too long, content policy, ...)
    "error",  # anything else LiteLLM raised
]

# HTTP statuses worth retrying: rate limits, request timeouts, server errors, Anthropic's "overloaded".
TRANSIENT_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 520, 522, 524, 529})


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try before a call counts as failed.

    Wait before retry n (1-based) is `initial_seconds * 2**(n-1)` plus up to `jitter_seconds`,
    at least the provider's Retry-After, never more than `max_wait_seconds`.
    """

    max_attempts: int = 6
    initial_seconds: float = 1.0
    max_wait_seconds: float = 60.0
    jitter_seconds: float = 1.0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> RetryPolicy:
        """Defaults, overridden by WPBENCH_MODEL_MAX_ATTEMPTS / _RETRY_INITIAL_SECONDS /
        _RETRY_MAX_SECONDS / _RETRY_JITTER_SECONDS (the controller and tests tune them this way)."""
        env = os.environ if env is None else env
        d = cls()
        return cls(
            max_attempts=max(1, int(env.get("WPBENCH_MODEL_MAX_ATTEMPTS", d.max_attempts))),
            initial_seconds=float(env.get("WPBENCH_MODEL_RETRY_INITIAL_SECONDS", d.initial_seconds)),
            max_wait_seconds=float(env.get("WPBENCH_MODEL_RETRY_MAX_SECONDS", d.max_wait_seconds)),
            jitter_seconds=float(env.get("WPBENCH_MODEL_RETRY_JITTER_SECONDS", d.jitter_seconds)),
        )

    def wait(self, retry_number: int, retry_after: float | None) -> float:
        backoff = self.initial_seconds * 2.0 ** (retry_number - 1) + random.uniform(0.0, self.jitter_seconds)
        return float(min(self.max_wait_seconds, max(backoff, retry_after or 0.0)))


class ModelCallError(Exception):
    """A completion that could not be had. `str()` is a one-line message naming the model."""

    def __init__(self, model: str, kind: ErrorKind, detail: str, usage: Usage | None = None) -> None:
        self.model = model
        self.kind = kind
        self.detail = detail
        self.usage = usage or Usage()
        super().__init__(f"{model}: {_KIND_TEXT[kind]}: {detail}")


_KIND_TEXT: dict[ErrorKind, str] = {
    "unknown_model": "unknown model",
    "missing_key": "missing API key",
    "auth": "authentication failed",
    "rate_limited": "rate limited",
    "outage": "provider unavailable",
    "timeout": "timed out",
    "bad_request": "request refused",
    "error": "model call failed",
}


@dataclass
class Completion:
    text: str
    usage: Usage
    finish_reason: str | None = None
    temperature_dropped: bool = False
    response_model: str = ""


@dataclass
class _Attempts:
    """Bookkeeping across the attempts of one logical call."""

    calls: int = 0
    retries: int = 0


# Models seen to reject `temperature` in this process (LiteLLM name -> True).
_NO_TEMPERATURE: set[str] = set()
_init_lock = threading.Lock()
_litellm_module: Any = None
_dotenv_loaded = False


def load_dotenv_once() -> None:
    """Load `.env` from the working directory (or a parent) without overriding the environment."""
    global _dotenv_loaded
    if _dotenv_loaded:
        return
    from dotenv import find_dotenv, load_dotenv

    path = find_dotenv(usecwd=True)
    if path:
        load_dotenv(path, override=False)
    _dotenv_loaded = True


def litellm_module() -> Any:
    """Import and configure LiteLLM (once): bundled price map, no debug banners, no telemetry."""
    global _litellm_module
    if _litellm_module is None:
        with _init_lock:
            if _litellm_module is None:
                os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
                litellm: Any = importlib.import_module("litellm")
                litellm.suppress_debug_info = True
                litellm.telemetry = False
                litellm.set_verbose = False
                logging.getLogger("LiteLLM").setLevel(logging.WARNING)
                _litellm_module = litellm
    return _litellm_module


def preflight(model_name: str) -> None:
    """Raise ModelCallError (unknown_model / missing_key) before any request is sent."""
    load_dotenv_once()
    litellm = litellm_module()
    try:
        _, provider, _, _ = litellm.get_llm_provider(model_name)
    except Exception as exc:  # LiteLLM raises BadRequestError with a long help text
        raise ModelCallError(
            model_name,
            "unknown_model",
            "LiteLLM cannot tell which provider serves it; use LiteLLM's provider/model form "
            "(e.g. openai/gpt-4o, anthropic/claude-sonnet-4-20250514, gemini/gemini-2.5-pro)",
        ) from exc
    try:
        env_check = litellm.validate_environment(model_name)
    except Exception:  # an exotic provider LiteLLM cannot check: let the call itself tell
        return
    if not env_check.get("keys_in_environment", True):
        missing = list(env_check.get("missing_keys") or [])
        raise ModelCallError(
            model_name,
            "missing_key",
            f"set {' or '.join(missing) or 'the provider key'} in the environment or a .env file (provider {provider})",
        )


def complete(
    model: ModelSpec,
    messages: Sequence[Message],
    *,
    retry: RetryPolicy | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Completion:
    """Send one chat completion and return its text and usage.

    Args:
        model: LiteLLM model name plus sampling settings and the per-attempt timeout.
        messages: OpenAI-style messages (`role`, `content`).
        retry: backoff policy; default `RetryPolicy.from_env()`.
        sleep: how to wait between attempts (tests pass a recorder).
    Returns:
        The completion text (empty string when the model returned no content) and its usage.
    Raises:
        ModelCallError: unknown model, missing key, refused key, or a provider still failing
            after every retry. Its `usage` counts the attempts made.
    """
    policy = retry or RetryPolicy.from_env()
    if model.max_retries is not None and retry is None:
        policy = dataclasses.replace(policy, max_attempts=model.max_retries + 1)
    preflight(model.name)
    litellm = litellm_module()
    # max_retries=0: the OpenAI SDK under LiteLLM would otherwise retry on its own, uncounted.
    kwargs: dict[str, Any] = {"timeout": model.timeout_seconds, "max_retries": 0}
    if model.max_tokens is not None:
        kwargs["max_tokens"] = model.max_tokens
    if model.top_p is not None:
        kwargs["top_p"] = model.top_p
    send_temperature = model.temperature is not None and model.name not in _NO_TEMPERATURE
    attempts = _Attempts()
    while True:
        call_kwargs = dict(kwargs)
        if send_temperature:
            call_kwargs["temperature"] = model.temperature
        try:
            response, latency_ms = _with_retries(litellm, model.name, messages, call_kwargs, policy, attempts, sleep)
        except _TemperatureRejected:
            _NO_TEMPERATURE.add(model.name)
            log.info("%s rejects temperature; retrying without it", model.name)
            send_temperature = False
            attempts.retries += 1
            continue
        break
    usage = Usage(
        prompt_tokens=_usage_int(response, "prompt_tokens"),
        completion_tokens=_usage_int(response, "completion_tokens"),
        cost_usd=_cost(litellm, response),
        latency_ms=latency_ms,
        calls=attempts.calls,
        retries=attempts.retries,
    )
    choice = response.choices[0] if getattr(response, "choices", None) else None
    message = getattr(choice, "message", None)
    text = getattr(message, "content", None) or ""
    return Completion(
        text=text if isinstance(text, str) else str(text),
        usage=usage,
        finish_reason=getattr(choice, "finish_reason", None),
        temperature_dropped=model.temperature is not None and not send_temperature,
        response_model=str(getattr(response, "model", "") or ""),
    )


class _TemperatureRejected(Exception):
    pass


def _with_retries(
    litellm: Any,
    name: str,
    messages: Sequence[Message],
    kwargs: dict[str, Any],
    policy: RetryPolicy,
    attempts: _Attempts,
    sleep: Callable[[float], None],
) -> tuple[Any, int]:
    """Call until success or a permanent error; return the response and the successful attempt's latency."""
    from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt

    def attempt() -> tuple[Any, int]:
        attempts.calls += 1
        started = time.monotonic()
        response = litellm.completion(model=name, messages=[dict(m) for m in messages], **kwargs)
        return response, int((time.monotonic() - started) * 1000)

    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        return policy.wait(state.attempt_number, _retry_after(exc))

    def before_sleep(state: RetryCallState) -> None:
        attempts.retries += 1
        exc = state.outcome.exception() if state.outcome else None
        wait_s = state.next_action.sleep if state.next_action else 0.0
        log.warning("%s: attempt %d failed (%s); retrying in %.1fs", name, state.attempt_number, _short(exc), wait_s)

    retrying = Retrying(
        retry=retry_if_exception(lambda e: _is_transient(litellm, e)),
        stop=stop_after_attempt(policy.max_attempts),
        wait=wait,
        sleep=sleep,
        before_sleep=before_sleep,
        reraise=True,
    )
    try:
        result: tuple[Any, int] = retrying(attempt)
        return result
    except Exception as exc:
        raise _classify(litellm, name, exc, attempts, "temperature" in kwargs) from exc


def _is_transient(litellm: Any, exc: BaseException) -> bool:
    transient = (
        litellm.RateLimitError,
        litellm.APIConnectionError,  # includes litellm.Timeout
        litellm.Timeout,
        litellm.ServiceUnavailableError,
        litellm.InternalServerError,
        litellm.BadGatewayError,
    )
    if isinstance(exc, transient):
        # Missing OpenAI credentials surface as InternalServerError; they never heal by waiting.
        return "missing credentials" not in str(exc).lower()
    return getattr(exc, "status_code", None) in TRANSIENT_STATUS


def _classify(litellm: Any, name: str, exc: Exception, attempts: _Attempts, sent_temperature: bool) -> Exception:
    usage = Usage(calls=attempts.calls, retries=attempts.retries)
    detail = _short(exc)
    tries = f" (after {attempts.calls} attempt{'s' if attempts.calls != 1 else ''})"
    if sent_temperature and _rejects_temperature(litellm, exc):
        return _TemperatureRejected()
    if isinstance(exc, litellm.RateLimitError):
        return ModelCallError(name, "rate_limited", detail + tries, usage)
    if isinstance(exc, litellm.Timeout):
        return ModelCallError(name, "timeout", detail + tries, usage)
    if isinstance(exc, litellm.NotFoundError):
        return ModelCallError(name, "unknown_model", f"the provider does not know it: {detail}", usage)
    if isinstance(exc, litellm.AuthenticationError | litellm.PermissionDeniedError):
        return ModelCallError(name, "auth", f"{detail}; check the provider key", usage)
    if "missing credentials" in detail.lower():
        return ModelCallError(name, "missing_key", detail, usage)
    if _is_transient(litellm, exc):
        return ModelCallError(name, "outage", detail + tries, usage)
    if isinstance(exc, litellm.BadRequestError | litellm.UnprocessableEntityError):
        return ModelCallError(name, "bad_request", detail, usage)
    return ModelCallError(name, "error", f"{type(exc).__name__}: {detail}", usage)


def _rejects_temperature(litellm: Any, exc: BaseException) -> bool:
    if not isinstance(exc, litellm.BadRequestError | litellm.UnsupportedParamsError | litellm.UnprocessableEntityError):
        return False
    return "temperature" in str(exc).lower()


def _retry_after(exc: BaseException | None) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    value = headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _short(exc: BaseException | None) -> str:
    """LiteLLM messages repeat class names and add help paragraphs; keep the first useful line."""
    if exc is None:
        return ""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    for prefix in ("litellm.", "OpenAIException - "):
        text = text.replace(prefix, "")
    text = re.sub(r"^(\w+): \1: ", r"\1: ", text)  # "RateLimitError: RateLimitError: ..." -> once
    return text[:300]


def _usage_int(response: Any, key: str) -> int:
    usage = getattr(response, "usage", None)
    value = getattr(usage, key, None) if usage is not None else None
    return int(value) if isinstance(value, int | float) else 0


def _cost(litellm: Any, response: Any) -> float:
    """Cost from LiteLLM's price map; 0.0 for models it has no price for (e.g. local servers)."""
    try:
        return float(litellm.completion_cost(completion_response=response) or 0.0)
    except Exception:
        hidden = getattr(response, "_hidden_params", None) or {}
        cost = hidden.get("response_cost") if isinstance(hidden, dict) else None
        return float(cost) if isinstance(cost, int | float) else 0.0
