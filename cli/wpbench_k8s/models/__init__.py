"""Model generation for the benchmark: LiteLLM calls, prompts, extraction, skills, knowledge, judge.

The pipeline (and the in-cluster controller) call `generate.generate_candidate`; the run report
uses `compare`. Nothing here imports LiteLLM at module import time: `import litellm` costs
seconds, so it happens inside `client` only when a model is actually called.
"""

from __future__ import annotations

__all__ = ["ModelCallError", "generate_candidate"]

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from wpbench_k8s.models.client import ModelCallError
    from wpbench_k8s.models.generate import generate_candidate


def __getattr__(name: str) -> Any:
    # Lazy re-exports: `from wpbench_k8s.models import generate_candidate` works without pulling
    # the submodules in at package import.
    if name == "generate_candidate":
        from wpbench_k8s.models import generate

        return generate.generate_candidate
    if name == "ModelCallError":
        from wpbench_k8s.models import client

        return client.ModelCallError
    raise AttributeError(name)
