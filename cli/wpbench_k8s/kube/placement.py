"""Where grader pods run and who admits them: placement (nodes, pull secrets, runtime class) and queueing.

A release sets defaults (the chart's `grader.placement` and `grader.queue`, passed to the controller); a run
overrides them (`submit --placement FILE`, `--queue`, `run.queue` in the config), stored in its spec. Each
field the run sets replaces the default's whole value (a run's nodeSelector is not merged key by key into
the release's: the run says where, entirely). The keys are those of a pod spec, spelt as in kubectl YAML.

Queueing: a run that names a Kueue LocalQueue gets its grader Jobs created suspended with
`kueue.x-k8s.io/queue-name`; Kueue admits them when its ClusterQueue has quota, and unsuspends them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
# A grader evicted mid-grade is lost work (the attempt is retried as infrastructure): ask cluster autoscalers
# not to remove its node while it runs. Set on every grader pod; a run cannot turn it off.
NO_EVICTION_ANNOTATIONS = {
    "cluster-autoscaler.kubernetes.io/safe-to-evict": "false",
    "karpenter.sh/do-not-disrupt": "true",
}
# A DNS-1123 label, at most 63 characters: a LocalQueue, WorkloadPriorityClass, Secret or class name here.
NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"


class Toleration(BaseModel):
    """One pod toleration (core/v1 Toleration), checked here so a typo fails at submit, not at Job creation."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    key: str | None = None
    operator: Literal["Exists", "Equal"] | None = None
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = Field(default=None, alias="tolerationSeconds")


class Placement(BaseModel):
    """Pod-spec fields for grader pods. Empty fields leave the pod as it is (or take the release default)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    image_pull_secrets: list[str] = Field(default_factory=list, alias="imagePullSecrets")
    node_selector: dict[str, str] = Field(default_factory=dict, alias="nodeSelector")
    tolerations: list[Toleration] = Field(default_factory=list)
    affinity: dict[str, Any] = Field(default_factory=dict)
    priority_class_name: str = Field(default="", alias="priorityClassName", max_length=253, pattern=r"^$|" + _SUBDOMAIN)
    runtime_class_name: str = Field(default="", alias="runtimeClassName", max_length=253, pattern=r"^$|" + _SUBDOMAIN)

    @field_validator("image_pull_secrets")
    @classmethod
    def _secret_names(cls, names: list[str]) -> list[str]:
        import re

        for name in names:
            if len(name) > 253 or not re.match(_SUBDOMAIN, name):
                raise ValueError(f"imagePullSecrets: {name!r} is not a Secret name")
        return names

    @field_validator("affinity")
    @classmethod
    def _affinity_keys(cls, affinity: dict[str, Any]) -> dict[str, Any]:
        unknown = set(affinity) - {"nodeAffinity", "podAffinity", "podAntiAffinity"}
        if unknown:
            raise ValueError(f"affinity: unknown key(s) {sorted(unknown)} (nodeAffinity, podAffinity, podAntiAffinity)")
        return affinity

    def over(self, default: Placement) -> Placement:
        """This placement, with the default's value for every field this one leaves empty."""
        mine = self.model_dump(exclude_defaults=True)
        return default.model_copy(update={k: getattr(self, k) for k in mine})

    def spec(self) -> dict[str, Any]:
        """The fields set, camelCase (as stored in a run's spec.placement)."""
        return self.model_dump(mode="json", by_alias=True, exclude_defaults=True, exclude_none=True)

    def pod_fields(self) -> dict[str, Any]:
        """Keyword arguments for `V1PodSpec` (tolerations and affinity as API dicts, camelCase)."""
        fields: dict[str, Any] = {}
        if self.image_pull_secrets:
            fields["image_pull_secrets"] = [{"name": name} for name in self.image_pull_secrets]
        if self.node_selector:
            fields["node_selector"] = dict(self.node_selector)
        if self.tolerations:
            fields["tolerations"] = [
                t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in self.tolerations
            ]
        if self.affinity:
            fields["affinity"] = dict(self.affinity)
        if self.priority_class_name:
            fields["priority_class_name"] = self.priority_class_name
        if self.runtime_class_name:
            fields["runtime_class_name"] = self.runtime_class_name
        return fields


def parse_placement(doc: object, where: str) -> Placement:
    """A placement document (a mapping of the fields above); ValueError naming `where` and the field."""
    from pydantic import ValidationError

    if doc is None:
        return Placement()
    if not isinstance(doc, dict):
        raise ValueError(f"{where}: a placement is a mapping of pod-spec fields, not {type(doc).__name__}")
    try:
        return Placement.model_validate(doc)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"{where}: {field}: {first['msg']}") from None
