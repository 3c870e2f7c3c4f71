"""Reading the cluster-wide engine options (the ConfigMap ``ebb-engine-options``) where a service finds them.

Every service that runs the engine (the consolidation-planner, the decisions-api, the embedded mode) reads the
same object, so their passes, plans and explanations agree, and the termination-executor takes its provider from
it, so it retires nodes the way the planner planned for; ``ebb.core.options`` parses it. A pod has the
ConfigMap mounted as a directory, one file per key (deploy/kubernetes); a person may give a YAML file instead
(the ConfigMap as ``kubectl get -o yaml`` prints it, or a plain mapping). A path that does not exist is no
object: the service's own settings (``defaults``) stand, as before the object existed. Files whose names start
with a dot are the kubelet's bookkeeping of a mounted ConfigMap (``..data``) and are not keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import yaml

from ebb.core.methods.base import EngineOptions
from ebb.core.options import EngineOptionsError, configured_provider, data_of, parse_engine_options

#: where the pods of deploy/kubernetes have the ConfigMap mounted
DEFAULT_PATH = "/etc/ebb/engine-options"


def read_data(path: Path) -> Mapping[str, object] | None:
    """The option keys at ``path`` (a mounted ConfigMap directory or a YAML file); None when nothing is there."""
    if path.is_dir():
        return {entry.name: entry.read_text(encoding="utf-8").strip() for entry in sorted(path.iterdir())
                if not entry.name.startswith(".") and entry.is_file()}
    if not path.is_file():
        return None
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise EngineOptionsError([f"{path} is not YAML: {e}"]) from e
    if document is None:
        return {}
    if not isinstance(document, Mapping):
        raise EngineOptionsError([f"{path} must hold a ConfigMap or a mapping of option keys"])
    return data_of(document)


def read_engine_options(path: str | Path | None, defaults: EngineOptions) -> EngineOptions:
    """The engine options the object at ``path`` sets over ``defaults`` (``defaults`` when ``path`` is empty or
    holds nothing); `EngineOptionsError` names every bad key."""
    if not path:
        return defaults
    data = read_data(Path(path))
    return defaults if data is None else parse_engine_options(data, defaults)


def read_provider(path: str | Path | None, default: str) -> str:
    """The provider the object at ``path`` names, else ``default`` (also when ``path`` is empty or holds nothing);
    `EngineOptionsError` names every bad key."""
    if not path:
        return default
    data = read_data(Path(path))
    return default if data is None else configured_provider(data, default)
