"""The cluster-wide engine options (ebb.core.options): the ConfigMap ebb-engine-options's data parsed into the core's
EngineOptions over a service's own settings, every bad key named."""

from __future__ import annotations

import pytest

from ebb.core.methods.base import EngineOptions
from ebb.core.options import EngineOptionsError, configured_provider, data_of, options_data, parse_engine_options


def test_an_empty_object_keeps_the_defaults() -> None:
    assert parse_engine_options({}) == EngineOptions()
    mine = EngineOptions(spot_to_spot=True, explain=False, require_nodeclaim=True)
    assert parse_engine_options({}, mine) == mine


@pytest.mark.parametrize(("data", "expected"), [
    ({"spotToSpot": "true"}, EngineOptions(spot_to_spot=True)),
    ({"spotToSpot": "False"}, EngineOptions()),
    ({"spotToSpot": True}, EngineOptions(spot_to_spot=True)),
    ({"provider": "karpenter"}, EngineOptions(require_nodeclaim=True)),
    ({"provider": "kwok"}, EngineOptions()),
    ({"provider": " none "}, EngineOptions()),
    ({"explain": "off"}, EngineOptions(explain=False)),
    ({"maxReplacements": "3"}, EngineOptions(max_replacements=3)),
    ({"maxReplacements": 1}, EngineOptions()),
    ({"consolidationSearch": " Optimizer "}, EngineOptions(search="optimizer")),
    ({"consolidationSearch": "greedy"}, EngineOptions()),
    ({"spotToSpot": "yes", "provider": "karpenter", "explain": "false"},
     EngineOptions(spot_to_spot=True, require_nodeclaim=True, explain=False)),
])
def test_each_key_sets_its_option(data: dict[str, object], expected: EngineOptions) -> None:
    assert parse_engine_options(data) == expected


def test_a_key_the_object_sets_replaces_the_services_own_setting() -> None:
    service = EngineOptions(spot_to_spot=True, require_nodeclaim=True)
    assert parse_engine_options({"provider": "none"}, service) == EngineOptions(spot_to_spot=True)
    assert parse_engine_options({"spotToSpot": "false"}, service) == EngineOptions(require_nodeclaim=True)


def test_every_bad_key_is_named_at_once() -> None:
    with pytest.raises(EngineOptionsError) as error:
        parse_engine_options({"spotToSpot": "maybe", "provider": "gke", "spot_to_spot": "true",
                              "maxReplacements": "0", "consolidationSearch": "best"})
    assert error.value.problems == (
        "unknown key(s) spot_to_spot (known: spotToSpot, provider, explain, karpenterPace, maxReplacements, "
        "consolidationSearch)",
        "spotToSpot: 'maybe' is not true or false",
        "maxReplacements: '0' is not a whole number of 1 or more",
        "consolidationSearch: 'best' is not one of greedy, optimizer",
        "provider: 'gke' is not one of none, kwok, karpenter",
    )
    with pytest.raises(EngineOptionsError, match=r"maxReplacements: '2\.5' is not a whole number"):
        parse_engine_options({"maxReplacements": "2.5"})
    assert str(error.value).startswith("ebb-engine-options: unknown key(s) spot_to_spot")


def test_a_configmap_document_gives_its_data() -> None:
    document = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ebb-engine-options"},
                "data": {"spotToSpot": "true"}}
    assert parse_engine_options(data_of(document)) == EngineOptions(spot_to_spot=True)
    assert data_of({"kind": "ConfigMap", "metadata": {}}) == {}
    assert data_of({"provider": "kwok"}) == {"provider": "kwok"}
    with pytest.raises(EngineOptionsError, match="data: must be a mapping"):
        data_of({"kind": "ConfigMap", "data": ["spotToSpot"]})


@pytest.mark.parametrize("options", [EngineOptions(), EngineOptions(spot_to_spot=True, require_nodeclaim=True),
                                     EngineOptions(explain=False), EngineOptions(karpenter_pace=True),
                                     EngineOptions(max_replacements=4), EngineOptions(search="optimizer")])
def test_the_data_of_options_parses_back_to_them(options: EngineOptions) -> None:
    assert parse_engine_options(options_data(options)) == options


@pytest.mark.parametrize(("data", "default", "expected"), [
    ({}, "none", "none"),  # no key: the executor's own setting
    ({"spotToSpot": "true"}, "kwok", "kwok"),
    ({"provider": "karpenter"}, "none", "karpenter"),  # the object's replaces it
    ({"provider": " Kwok "}, "karpenter", "kwok"),
])
def test_the_executors_provider_is_the_objects_where_it_names_one(data: dict[str, object], default: str,
                                                                   expected: str) -> None:
    assert configured_provider(data, default) == expected
    if "provider" in data:  # the planner's options from the same object need NodeClaims exactly for karpenter
        assert parse_engine_options(data).require_nodeclaim is (expected == "karpenter")


@pytest.mark.parametrize("data", [{"provider": "aws"}, {"spotToSpot": "maybe", "provider": "karpenter"}, {"x": "1"}])
def test_the_executor_refuses_the_object_the_planner_refuses(data: dict[str, object]) -> None:
    with pytest.raises(EngineOptionsError):
        configured_provider(data, "none")
