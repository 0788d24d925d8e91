"""The conformance suite: one test module per spec group, every test marked with the clause
it checks. Run it with `pytest --pyargs conformance.suite --backend NAME` or through the CLI."""
