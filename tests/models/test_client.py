"""LiteLLM calls over real HTTP to the fake provider: retries, timeouts, quirks, usage, errors."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fake_provider import FakeProvider, Reply, rate_limited, rejects_temperature, server_error

from wpbench_k8s.manifest import ModelSpec
from wpbench_k8s.models import client
from wpbench_k8s.models.client import ModelCallError, RetryPolicy, complete

MSGS = [{"role": "user", "content": "Say hi"}]
REPO = Path(__file__).resolve().parents[2]


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def test_canned_completion_text_and_usage(provider: FakeProvider) -> None:
    provider.script("a", Reply(content="hello there", prompt_tokens=17, completion_tokens=5, delay=0.05))
    out = complete(ModelSpec(name="openai/a"), MSGS)
    assert out.text == "hello there"
    assert (out.usage.prompt_tokens, out.usage.completion_tokens) == (17, 5)
    assert out.usage.calls == 1 and out.usage.retries == 0
    assert out.usage.latency_ms >= 50
    assert out.usage.cost_usd == 0.0  # no price for an unknown model name
    body = provider.bodies("a")[0]
    assert body["messages"] == MSGS
    assert "temperature" not in body and "max_tokens" not in body
    assert body["_authorization"] == "Bearer sk-fake-test-key"


def test_cost_comes_from_litellm_price_map(provider: FakeProvider) -> None:
    import litellm

    provider.script("gpt-4o-mini", Reply(content="x", prompt_tokens=1000, completion_tokens=500))
    out = complete(ModelSpec(name="openai/gpt-4o-mini", temperature=0.0, max_tokens=64), MSGS)
    price = litellm.model_cost["gpt-4o-mini"]
    expected = 1000 * price["input_cost_per_token"] + 500 * price["output_cost_per_token"]
    assert out.usage.cost_usd == pytest.approx(expected)
    assert out.usage.cost_usd > 0
    body = provider.bodies("gpt-4o-mini")[0]
    assert body["temperature"] == 0.0 and body["max_tokens"] == 64


def test_rate_limits_then_success_cost_retries_not_failures(provider: FakeProvider) -> None:
    provider.script("a", rate_limited(), rate_limited(), rate_limited(), Reply(content="finally"))
    sleeps = Sleeps()
    policy = RetryPolicy(max_attempts=6, initial_seconds=0.5, max_wait_seconds=30, jitter_seconds=0)
    out = complete(ModelSpec(name="openai/a"), MSGS, retry=policy, sleep=sleeps)
    assert out.text == "finally"
    assert provider.calls("a") == 4
    assert (out.usage.calls, out.usage.retries) == (4, 3)
    assert sleeps == [0.5, 1.0, 2.0]  # exponential backoff


def test_retry_after_header_is_honoured_up_to_the_cap(provider: FakeProvider) -> None:
    provider.script("a", rate_limited("7"), rate_limited("500"), Reply(content="ok"))
    sleeps = Sleeps()
    policy = RetryPolicy(max_attempts=3, initial_seconds=0.1, max_wait_seconds=20, jitter_seconds=0)
    complete(ModelSpec(name="openai/a"), MSGS, retry=policy, sleep=sleeps)
    assert sleeps == [7.0, 20.0]


def test_rate_limited_past_every_attempt_is_a_clear_error(provider: FakeProvider) -> None:
    provider.script("a", rate_limited())
    with pytest.raises(ModelCallError) as err:
        complete(
            ModelSpec(name="openai/a"), MSGS, retry=RetryPolicy(max_attempts=3, initial_seconds=0, jitter_seconds=0)
        )
    assert err.value.kind == "rate_limited"
    assert str(err.value).startswith("openai/a: rate limited:")
    assert "after 3 attempts" in str(err.value)
    assert provider.calls("a") == 3
    assert (err.value.usage.calls, err.value.usage.retries) == (3, 2)


@pytest.mark.parametrize("status", [500, 502, 503])
def test_server_errors_are_retried(provider: FakeProvider, status: int) -> None:
    provider.script("a", server_error(status), server_error(status), Reply(content="up again"))
    out = complete(ModelSpec(name="openai/a"), MSGS)
    assert out.text == "up again" and out.usage.retries == 2
    assert provider.calls("a") == 3


def test_outage_after_retries_names_the_model(provider: FakeProvider) -> None:
    provider.script("a", server_error(503))
    with pytest.raises(ModelCallError) as err:
        complete(
            ModelSpec(name="openai/a"), MSGS, retry=RetryPolicy(max_attempts=4, initial_seconds=0, jitter_seconds=0)
        )
    assert err.value.kind == "outage"
    assert str(err.value).startswith("openai/a: provider unavailable:")
    assert provider.calls("a") == 4


def test_connection_refused_is_an_outage(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    monkeypatch.setenv("OPENAI_API_BASE", "http://127.0.0.1:9/v1")  # discard port: nothing listens
    with pytest.raises(ModelCallError) as err:
        complete(
            ModelSpec(name="openai/a"), MSGS, retry=RetryPolicy(max_attempts=2, initial_seconds=0, jitter_seconds=0)
        )
    assert err.value.kind == "outage" and err.value.usage.calls == 2


def test_timeout_per_attempt(provider: FakeProvider) -> None:
    provider.script("slow", Reply(content="late", delay=10))
    started = time.monotonic()
    with pytest.raises(ModelCallError) as err:
        complete(
            ModelSpec(name="openai/slow", timeout_seconds=0.3),
            MSGS,
            retry=RetryPolicy(max_attempts=2, initial_seconds=0, jitter_seconds=0),
        )
    elapsed = time.monotonic() - started
    assert err.value.kind == "timeout"
    assert provider.calls("slow") == 2
    assert elapsed < 8  # two 0.3 s attempts, never the server's 10 s (a margin no loaded machine misses)


def test_unknown_model_at_the_provider_is_not_retried(provider: FakeProvider) -> None:
    with pytest.raises(ModelCallError) as err:
        complete(ModelSpec(name="openai/no-such-model"), MSGS)
    assert err.value.kind == "unknown_model"
    assert "no-such-model" in str(err.value)
    assert provider.calls() == 1


def test_refused_key_is_auth_error(provider: FakeProvider) -> None:
    provider.script("a", Reply(status=401, error="Incorrect API key provided"))
    with pytest.raises(ModelCallError) as err:
        complete(ModelSpec(name="openai/a"), MSGS)
    assert err.value.kind == "auth" and provider.calls() == 1


def test_unknown_provider_fails_before_any_request(provider: FakeProvider) -> None:
    with pytest.raises(ModelCallError) as err:
        complete(ModelSpec(name="definitely-not-a-model"), MSGS)
    assert err.value.kind == "unknown_model"
    assert "provider/model form" in str(err.value)
    assert provider.calls() == 0


def test_missing_key_fails_before_any_request(provider: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(ModelCallError) as err:
        complete(ModelSpec(name="openai/a"), MSGS)
    assert err.value.kind == "missing_key"
    assert "OPENAI_API_KEY" in str(err.value)
    assert provider.calls() == 0
    with pytest.raises(ModelCallError) as err2:
        complete(ModelSpec(name="anthropic/claude-sonnet-4-20250514"), MSGS)
    assert err2.value.kind == "missing_key" and "ANTHROPIC_API_KEY" in str(err2.value)


def test_model_rejecting_temperature_is_retried_without_it(provider: FakeProvider) -> None:
    provider.respond("o-reasoner", rejects_temperature(lambda body: Reply(content="fine")))
    spec = ModelSpec(name="openai/o-reasoner", temperature=0.2)
    out = complete(spec, MSGS)
    assert out.text == "fine" and out.temperature_dropped
    bodies = provider.bodies("o-reasoner")
    assert [("temperature" in b) for b in bodies] == [True, False]
    assert (out.usage.calls, out.usage.retries) == (2, 1)
    # Remembered: the next call goes straight without it.
    again = complete(spec, MSGS)
    assert again.usage.calls == 1 and "temperature" not in provider.bodies("o-reasoner")[-1]


def test_keys_from_dotenv_never_override_the_environment(
    provider: FakeProvider, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    (tmp_path / ".env").write_text("OPENAI_API_KEY=sk-from-dotenv\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(client, "_dotenv_loaded", False)
    provider.script("a", Reply(content="ok"))
    complete(ModelSpec(name="openai/a"), MSGS)
    assert provider.bodies("a")[-1]["_authorization"] == "Bearer sk-from-dotenv"
    assert os.environ["OPENAI_API_KEY"] == "sk-from-dotenv"
    # An environment variable (e.g. from a Kubernetes Secret) wins over .env.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-secret")
    monkeypatch.setattr(client, "_dotenv_loaded", False)
    complete(ModelSpec(name="openai/a"), MSGS)
    assert provider.bodies("a")[-1]["_authorization"] == "Bearer sk-from-secret"


def test_retry_policy_from_env() -> None:
    policy = RetryPolicy.from_env({"WPBENCH_MODEL_MAX_ATTEMPTS": "9", "WPBENCH_MODEL_RETRY_MAX_SECONDS": "5"})
    assert policy.max_attempts == 9 and policy.max_wait_seconds == 5
    assert RetryPolicy(initial_seconds=1, jitter_seconds=0, max_wait_seconds=60).wait(4, None) == 8.0


def test_importing_the_models_package_does_not_import_litellm() -> None:
    code = (
        "import sys\n"
        "import wpbench_k8s.models\n"
        "from wpbench_k8s.models import client, compare, extract, generate, judge, knowledge, prompts, skills\n"
        "from wpbench_k8s.models import generate_candidate\n"
        "import wpbench_k8s.pipeline, wpbench_k8s.commands.run\n"
        "assert 'litellm' not in sys.modules, 'litellm imported at module import'\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
