"""Model tests talk real HTTP to a fake OpenAI-compatible server on 127.0.0.1; never a provider."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_provider import FakeProvider

from wpbench_k8s.models import client


@pytest.fixture(autouse=True)
def _isolated_model_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No real keys or endpoints leak in; fast backoff; per-process model quirks forgotten."""
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE", "ANTHROPIC_API_KEY", "GEMINI_API_KEY",
                "GOOGLE_API_KEY"):  # fmt: skip
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("WPBENCH_MODEL_RETRY_INITIAL_SECONDS", "0.01")
    monkeypatch.setenv("WPBENCH_MODEL_RETRY_JITTER_SECONDS", "0")
    monkeypatch.setenv("WPBENCH_MODEL_RETRY_MAX_SECONDS", "0.05")
    monkeypatch.setattr(client, "_dotenv_loaded", True)  # tests opt in to .env loading explicitly
    client._NO_TEMPERATURE.clear()
    yield
    client._NO_TEMPERATURE.clear()


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProvider]:
    with FakeProvider() as server:
        monkeypatch.setenv("OPENAI_API_BASE", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-test-key")
        yield server
