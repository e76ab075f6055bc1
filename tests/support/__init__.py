"""What several test directories share: polling, the CLI, a second Docker engine.

Importable as ``support`` (tests/ is on ``sys.path``: its conftest.py is the root one);
the fixtures are registered by tests/conftest.py (``pytest_plugins``).
"""
