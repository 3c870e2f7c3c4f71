"""The decisions-api's routes, one module per resource, each an ``APIRouter`` named ``router``.

``ops`` (probes and metrics) is served without a token; the others sit under ``/v1`` behind the bearer token
(``ebb_decisions_api.app.create_app`` includes them in the order below, which is the order of the OpenAPI
document's paths). A route gets what it uses from the ``Context`` dependency (``ebb_decisions_api.context``) and
keeps its logic in the module that owns it: plans in ``ebb_decisions_api.planning``, explanations and budgets in
``ebb_decisions_api.explain``, the live state in ``ebb_decisions_api.live``, the store in ``DecisionStore``. The
route modules do not import each other (an import-linter contract).
"""
