"""The `ebb` command line (typer): ebb's top layer, above the embedded mode, the services and the library.

It is a package of its own (apps/cli, distribution ebb-cli) so that the library never depends on a
service: ``ebb run`` composes the services through ebb_embedded, and only this package may import that.
The import-linter contracts in pyproject.toml keep it so (see docs/architecture.md).

Installed alone (``pip install ebb-cli``) it is the dry run, ``ebb plan`` and ``ebb explain``, on the library's
base (``ebb-core``): the commands import the rest when they run, and a use whose extra (``live``, ``embedded``,
``sqlite``, ``api``, ``db``: apps/cli/pyproject.toml) is missing says which (``ebb_cli.common.require_extra``).
"""
