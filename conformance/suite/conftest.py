"""Loaded by pytest only when it collects the suite: the suite's hooks and fixtures. The options
are the entry point's (conformance/pytest_plugin.py), which imports nothing, so a project
that merely has the suite installed pays nothing for it."""

from gpt2_conformance.runtime.fixtures import (  # noqa: F401
    adapter,
    adapter_factory,
    capabilities,
    device,
    golden_tables,
    make_adapter,
    rounded_tables,
    tables,
)
from gpt2_conformance.runtime.hooks import (  # noqa: F401
    pytest_collection_finish,
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_report_header,
    pytest_runtest_call,
    pytest_runtest_logfinish,
    pytest_runtest_makereport,
    pytest_runtest_setup,
    pytest_sessionfinish,
    pytest_terminal_summary,
)
