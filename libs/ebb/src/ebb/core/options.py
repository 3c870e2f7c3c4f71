"""The cluster-wide engine options: one object every service that runs the engine reads (docs/architecture.md).

The planner's passes, the decisions-api's on-demand plans and explanations, and the embedded mode must run the
engine with the same options, or "why not this node?" gets two answers. So the options live in one object, the
ConfigMap ``ebb-engine-options`` of ebb's namespace (mounted into each pod as a directory, one file per key),
and this module turns its ``data`` into the core's ``EngineOptions``:

- ``spotToSpot`` (``true`` / ``false``): ``spot_to_spot``, a spot node may be replaced by a spot node;
- ``provider`` (``none`` / ``kwok`` / ``karpenter``): ``require_nodeclaim`` for ``karpenter``, a node without a
  NodeClaim is not a candidate; the termination-executor reads the same key as its provider
  (`configured_provider`), so the planner never proposes what the executor cannot retire;
- ``explain`` (``true`` / ``false``): ``explain``, every node that is left alone gets its cause;
- ``karpenterPace`` (``true`` / ``false``): ``karpenter_pace``, Karpenter's pace and search: single-node
  consolidation makes one command a pass, multi-node consolidation is Karpenter's prefix search with its
  replacement rules, and the planner looks again as Karpenter's disruption loop does (the back-test's simulations
  of Karpenter set it).
- ``maxReplacements`` (a whole number, 1 or more): ``max_replacements``, how many nodes one multi-node consolidation
  may launch (1, Karpenter's, unless set; more repacks a set of nodes onto several cheaper ones);
- ``consolidationSearch`` (``greedy`` / ``optimizer``): ``search``, how multi-node consolidation finds its set
  (greedily in candidate order unless set; ``optimizer``, a linear program over every candidate).

A key the object does not set keeps the value of ``defaults`` (a service's own settings, which keep an
installation without the object working as before). An unknown key or a value that is not one of the above is an
error naming the key, never silently ignored: a typo would otherwise make the services disagree with what the
operator wrote. Pure: a mapping in, a value out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Final

from ebb.core.methods.base import SEARCH_GREEDY, SEARCHES, EngineOptions

#: the name of the ConfigMap that holds the options, in ebb's namespace
CONFIGMAP_NAME: Final = "ebb-engine-options"
#: the providers ``provider`` may name (the termination-executor's), and the one that needs NodeClaims
PROVIDERS: Final = ("none", "kwok", "karpenter")
NODECLAIM_PROVIDER: Final = "karpenter"
KEYS: Final = ("spotToSpot", "provider", "explain", "karpenterPace", "maxReplacements", "consolidationSearch")
_TRUE: Final = frozenset({"true", "yes", "on", "1"})
_FALSE: Final = frozenset({"false", "no", "off", "0"})


class EngineOptionsError(ValueError):
    """The options object holds an unknown key or a value that is not allowed; the message names each."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(f"{CONFIGMAP_NAME}: " + "; ".join(problems))
        self.problems = tuple(problems)


def _flag(key: str, value: object, problems: list[str]) -> bool | None:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    problems.append(f"{key}: {value!r} is not true or false")
    return None


def data_of(document: Mapping[str, object]) -> Mapping[str, object]:
    """The option keys of ``document``: a ConfigMap's ``data`` when it is one (``kind: ConfigMap``), else the
    mapping itself (the files of a mounted ConfigMap, or a plain YAML mapping)."""
    if document.get("kind") == "ConfigMap":
        data = document.get("data") or {}
        if not isinstance(data, Mapping):
            raise EngineOptionsError(["data: must be a mapping of keys to strings"])
        return data
    return document


def parse_engine_options(data: Mapping[str, object], defaults: EngineOptions | None = None) -> EngineOptions:
    """The engine options ``data`` (a ConfigMap's ``data``, see `data_of`) sets over ``defaults``
    (default: the engine's); `EngineOptionsError` lists every key that is unknown or not valid."""
    options = defaults or EngineOptions()
    problems: list[str] = []
    unknown = sorted(str(k) for k in data if k not in KEYS)
    if unknown:
        problems.append(f"unknown key(s) {', '.join(unknown)} (known: {', '.join(KEYS)})")
    if "spotToSpot" in data:
        spot = _flag("spotToSpot", data["spotToSpot"], problems)
        if spot is not None:
            options = replace(options, spot_to_spot=spot)
    if "explain" in data:
        explain = _flag("explain", data["explain"], problems)
        if explain is not None:
            options = replace(options, explain=explain)
    if "karpenterPace" in data:
        pace = _flag("karpenterPace", data["karpenterPace"], problems)
        if pace is not None:
            options = replace(options, karpenter_pace=pace)
    if "maxReplacements" in data:
        text = str(data["maxReplacements"]).strip()
        if text.isdigit() and int(text) >= 1:
            options = replace(options, max_replacements=int(text))
        else:
            problems.append(f"maxReplacements: {data['maxReplacements']!r} is not a whole number of 1 or more")
    if "consolidationSearch" in data:
        search = str(data["consolidationSearch"]).strip().lower()
        if search in SEARCHES:
            options = replace(options, search=search)
        else:
            problems.append(f"consolidationSearch: {data['consolidationSearch']!r} is not one of {', '.join(SEARCHES)}")
    if "provider" in data:
        provider = str(data["provider"]).strip().lower()
        if provider in PROVIDERS:
            options = replace(options, require_nodeclaim=provider == NODECLAIM_PROVIDER)
        else:
            problems.append(f"provider: {data['provider']!r} is not one of {', '.join(PROVIDERS)}")
    if problems:
        raise EngineOptionsError(problems)
    return options


def configured_provider(data: Mapping[str, object], default: str) -> str:
    """The provider ``data`` (see `data_of`) names, else ``default`` (the termination-executor's own setting); the
    object is checked whole first, so an executor refuses the same bad object the planner refuses."""
    parse_engine_options(data)
    if "provider" not in data:
        return default
    return str(data["provider"]).strip().lower()


def options_data(options: EngineOptions, provider: str | None = None) -> dict[str, str]:
    """The ConfigMap ``data`` that gives ``options`` (``provider`` names the provider when the options need
    NodeClaims and it is not simply karpenter): the inverse of `parse_engine_options`."""
    if provider is None:
        provider = NODECLAIM_PROVIDER if options.require_nodeclaim else "none"
    data = {"spotToSpot": str(options.spot_to_spot).lower(), "provider": provider,
            "explain": str(options.explain).lower()}
    if options.karpenter_pace:
        data["karpenterPace"] = "true"
    if options.max_replacements != 1:
        data["maxReplacements"] = str(options.max_replacements)
    if options.search != SEARCH_GREEDY:
        data["consolidationSearch"] = options.search
    return data
